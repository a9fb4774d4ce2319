#!/usr/bin/env bash
# `make test`'s first step: the browser test needs Debian's chromium. Found: nothing to
# do. Missing: install it when this is root with apt-get, otherwise stop at once with
# one line saying what to install (never fail deep in the suite).
set -u
for name in chromium chromium-browser; do
  if command -v "$name" >/dev/null 2>&1; then exit 0; fi
done
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "make test: installing Debian's chromium for the headless-browser test (apt-get)..."
  export DEBIAN_FRONTEND=noninteractive
  if apt-get update -qq && apt-get install -y -qq chromium >/dev/null \
     && command -v chromium >/dev/null 2>&1; then
    exit 0
  fi
  echo "make test: apt-get could not install chromium; install it (apt-get install chromium) and run make test again" >&2
  exit 1
fi
echo "make test: chromium is missing; install it first (Debian/Ubuntu: sudo apt-get install chromium), then run make test again" >&2
exit 1
