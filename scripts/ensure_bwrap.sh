#!/usr/bin/env bash
# `make grade`'s first step: every submission is graded inside bubblewrap (bwrap), Debian's
# package `bubblewrap`. Found: nothing to do. Missing: install it when this is root with
# apt-get, otherwise stop at once with one line saying what to install.
set -u
if command -v bwrap >/dev/null 2>&1; then exit 0; fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "make grade: installing Debian's bubblewrap, the sandbox each submission runs in (apt-get)..."
  export DEBIAN_FRONTEND=noninteractive
  if apt-get update -qq && apt-get install -y -qq bubblewrap >/dev/null \
     && command -v bwrap >/dev/null 2>&1; then
    exit 0
  fi
  echo "make grade: apt-get could not install bubblewrap; install it (apt-get install bubblewrap) and run make grade again" >&2
  exit 1
fi
echo "make grade: bubblewrap (bwrap) is missing; install it first (Debian/Ubuntu: sudo apt-get install bubblewrap), or grade on Gradescope (see the instructor page)" >&2
exit 1
