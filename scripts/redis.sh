#!/usr/bin/env bash
# A throwaway Redis for tests (the Redis rate-limit store).
#
#   scripts/redis.sh install   install Debian's redis-server when it is missing
#   scripts/redis.sh [PORT]    install if needed, start redis-server on
#                              127.0.0.1:PORT (a free port when omitted) in a
#                              temp dir without persistence, print its URL
#                              (redis://127.0.0.1:PORT/0) on stdout, then run
#                              until stdin closes or SIGINT/SIGTERM, stop the
#                              server and remove the dir.
#
# internal/testkit (StartRedis, RedisURL) runs it once per test binary when
# CONTRACTD_TEST_REDIS_URL is unset; the server stops when the test binary
# exits (its end of stdin closes). Only loopback: protected mode, bind
# 127.0.0.1.
set -euo pipefail

install() {
  command -v redis-server >/dev/null && command -v redis-cli >/dev/null && return 0
  # As root, or through sudo (non-interactive) as scripts/chromium.sh does.
  local sudo=""
  if [ "$(id -u)" != 0 ]; then
    if ! command -v sudo >/dev/null; then
      echo "redis.sh: redis-server is missing and installing it needs root or sudo (apt-get install redis-server)" >&2
      exit 1
    fi
    sudo="sudo -n env DEBIAN_FRONTEND=noninteractive"
  fi
  # Test binaries run in parallel: one installs, the others wait for it.
  exec 9>"${TMPDIR:-/tmp}/contractd-redis-install.lock"
  flock 9
  if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; then
    echo "redis.sh: installing redis-server" >&2
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get -o DPkg::Lock::Timeout=300 update -qq >&2
    $sudo apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends redis-server redis-tools >&2
    # Debian's package starts a system-wide instance where an init runs;
    # the tests never use it.
  fi
  flock -u 9
}

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

start() {
  local want=${1:-} port i tries
  pid=
  dir=$(mktemp -d "${TMPDIR:-/tmp}/contractd-redis.XXXXXX")
  trap 'stop' EXIT
  trap 'exit 0' INT TERM HUP
  for tries in $(seq 1 20); do
    port=${want:-$((20000 + RANDOM % 40000))}
    if [ -z "$want" ] && ! port_free "$port"; then continue; fi
    redis-server --bind 127.0.0.1 --port "$port" --protected-mode yes --dir "$dir" \
      --save '' --appendonly no --daemonize no --logfile "$dir/redis.log" \
      --databases 16 </dev/null >/dev/null 2>&1 &
    pid=$!
    for i in $(seq 1 100); do
      if redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null | grep -q PONG; then
        echo "redis://127.0.0.1:$port/0"
        # Wait for the caller: EOF on stdin, or a signal (the traps).
        while read -r _; do :; done || true
        exit 0
      fi
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.05
    done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    pid=
    if [ -n "$want" ]; then break; fi
  done
  echo "redis.sh: redis-server did not start (log: $(tail -n 5 "$dir/redis.log" 2>/dev/null))" >&2
  exit 1
}

stop() {
  if [ -n "${pid:-}" ]; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  rm -rf "${dir:?}"
}

case "${1:-}" in
  install) install ;;
  ''|[0-9]*) install; start "${1:-}" ;;
  *) echo "usage: scripts/redis.sh [install|PORT]" >&2; exit 2 ;;
esac
