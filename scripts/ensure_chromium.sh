#!/usr/bin/env bash
# `make test`'s first step: the browser test needs Debian's chromium. Found: nothing to
# do. Missing: install it when this is root with apt-get, otherwise stop at once with
# one line saying what to install (never fail deep in the suite).
set -u
here=${BASH_SOURCE[0]%/*}   # not dirname: this runs where PATH may hold nothing
[ "$here" != "${BASH_SOURCE[0]}" ] || here=.
. "$here/debian_package.sh"
ensure_debian_package "make test" chromium "for the headless-browser test" \
  ", then run make test again" chromium chromium-browser
