#!/usr/bin/env bash
# Headless Chromium for the reviewer page tests (make test calls it before
# the Go tests). Idempotent: when a Chromium is already there it only
# prints its path. Otherwise it installs Debian's chromium package (as root,
# or through sudo), serialised with a lock so parallel runs do not collide
# on apt/dpkg. The Go tests look for $CONTRACTD_CHROMIUM, then
# /usr/bin/chromium, and fail (never skip) when neither runs.
set -euo pipefail

bin=${CONTRACTD_CHROMIUM:-/usr/bin/chromium}
if [ -x "$bin" ]; then
  echo "chromium: $bin"
  exit 0
fi

sudo=""
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null || { echo "chromium: not installed and not root (no sudo): apt-get install chromium" >&2; exit 1; }
  sudo="sudo -n env DEBIAN_FRONTEND=noninteractive"
fi
install() {
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get -o DPkg::Lock::Timeout=600 update -qq
  $sudo apt-get -o DPkg::Lock::Timeout=600 install -y -qq chromium >/dev/null
}
lock=${TMPDIR:-/tmp}/contractd-apt.lock
if command -v flock >/dev/null; then
  exec 9>"$lock"
  flock 9
  # Another run may have installed it while this one waited.
  [ -x /usr/bin/chromium ] || install
else
  install
fi
[ -x /usr/bin/chromium ] || { echo "chromium: apt-get did not install /usr/bin/chromium" >&2; exit 1; }
echo "chromium: /usr/bin/chromium ($(/usr/bin/chromium --version 2>/dev/null || echo unknown version))"
