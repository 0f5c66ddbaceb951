#!/usr/bin/env bash
# A C compiler for the race detector (make test runs every Go test with
# -race, which needs cgo; the go command turns cgo off when it finds no C
# compiler, and then `go test -race` stops at "-race requires cgo").
# Idempotent: when cgo is on it only prints the compiler. Otherwise it
# installs Debian's gcc and libc6-dev (as root, or through sudo),
# serialised with a lock as scripts/chromium.sh is.
set -euo pipefail
export GOTOOLCHAIN=local

if [ "$(go env CGO_ENABLED)" = 1 ]; then
  echo "cc: $(go env CC)"
  exit 0
fi
if [ -n "${CGO_ENABLED:-}" ]; then
  echo "cc: CGO_ENABLED=$CGO_ENABLED is set in the environment; the race detector needs 1" >&2
  exit 1
fi

sudo=""
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null || { echo "cc: no C compiler and not root (no sudo): apt-get install gcc libc6-dev" >&2; exit 1; }
  sudo="sudo -n env DEBIAN_FRONTEND=noninteractive"
fi
export DEBIAN_FRONTEND=noninteractive
exec 9>"${TMPDIR:-/tmp}/contractd-apt.lock"
flock 9
if [ "$(go env CGO_ENABLED)" != 1 ]; then
  $sudo apt-get -o DPkg::Lock::Timeout=600 update -qq
  $sudo apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends gcc libc6-dev >/dev/null
fi
flock -u 9
[ "$(go env CGO_ENABLED)" = 1 ] || { echo "cc: gcc installed but cgo is still off (go env CC: $(go env CC))" >&2; exit 1; }
echo "cc: $(go env CC)"
