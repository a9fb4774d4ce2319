# Sourced by ensure_chromium.sh and ensure_bwrap.sh (a function, not a script of its own).
#
# ensure_debian_package TARGET PACKAGE PURPOSE HINT COMMAND...
#   Found (any COMMAND on PATH): exit 0, silently. Missing: as root with apt-get, install
#   PACKAGE and exit 0 once the first COMMAND is there; otherwise stop at once with one
#   line on stderr saying what to install (HINT ends it) and exit 1.
ensure_debian_package() {
  local target=$1 package=$2 purpose=$3 hint=$4
  shift 4
  local name shown=$package
  [ "$package" = "$1" ] || shown="$package ($1)"
  for name in "$@"; do
    if command -v "$name" >/dev/null 2>&1; then exit 0; fi
  done
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "$target: installing Debian's $package $purpose (apt-get)..."
    export DEBIAN_FRONTEND=noninteractive
    if apt-get update -qq && apt-get install -y -qq "$package" >/dev/null \
       && command -v "$1" >/dev/null 2>&1; then
      exit 0
    fi
    echo "$target: apt-get could not install $package; install it (apt-get install $package) and run $target again" >&2
    exit 1
  fi
  echo "$target: $shown is missing; install it first (Debian/Ubuntu: sudo apt-get install $package)$hint" >&2
  exit 1
}
