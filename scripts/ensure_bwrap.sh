#!/usr/bin/env bash
# `make grade`'s first step: every submission is graded inside bubblewrap (bwrap), Debian's
# package `bubblewrap`. Found: nothing to do. Missing: install it when this is root with
# apt-get, otherwise stop at once with one line saying what to install.
set -u
here=${BASH_SOURCE[0]%/*}   # not dirname: this runs where PATH may hold nothing
[ "$here" != "${BASH_SOURCE[0]}" ] || here=.
. "$here/debian_package.sh"
ensure_debian_package "make grade" bubblewrap "for the sandbox each submission is graded in" \
  ", or grade on Gradescope (see the instructor page)" bwrap
