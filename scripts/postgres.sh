#!/usr/bin/env bash
# A throwaway PostgreSQL for tests (review.store: postgres, several replicas).
#
#   scripts/postgres.sh install   install Debian's postgresql when missing (root or sudo)
#   scripts/postgres.sh start     install if needed, then initdb in a fresh temp
#                                 dir and start on a free 127.0.0.1 port; prints
#                                   CONTRACTD_TEST_PG_DSN=postgres://...
#                                   CONTRACTD_TEST_PG_DIR=/tmp/contractd-pg.XXXX
#                                 (eval-able; nothing else on stdout)
#   scripts/postgres.sh stop DIR  stop that server and remove DIR
#                                 (DIR defaults to $CONTRACTD_TEST_PG_DIR)
#   scripts/postgres.sh pause DIR   stop the server, keep its data (outage tests)
#   scripts/postgres.sh resume DIR  start it again on the same port
#   scripts/postgres.sh watch DIR PID  stop and remove DIR once process PID
#                                 is gone (a test binary that crashed)
#
# PostgreSQL refuses to run as root: as root the server runs as the
# unprivileged user contractd-test (created when missing), which owns DIR.
# Only loopback: listen_addresses is 127.0.0.1 and the socket lives in DIR.
# internal/testkit calls this once per test binary when CONTRACTD_TEST_PG_DSN
# is unset, so `go test` and `make test` need nothing started by hand.
set -euo pipefail

PG_USER="${CONTRACTD_PG_USER:-contractd-test}"

log() { echo "postgres.sh: $*" >&2; }

# bindir: the newest installed server's binaries (Debian keeps them out of PATH).
bindir() {
  local d
  d="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)"
  if [ -n "$d" ] && [ -x "$d/postgres" ] && [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then
    echo "$d"
  fi
}

install() {
  if [ -n "$(bindir)" ]; then
    return 0
  fi
  # As root, or through sudo (non-interactive) as scripts/chromium.sh does.
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    if ! command -v sudo >/dev/null; then
      log "PostgreSQL server binaries are missing and installing them needs root or sudo (apt-get install postgresql)"
      exit 1
    fi
    sudo="sudo -n env DEBIAN_FRONTEND=noninteractive"
  fi
  # Test binaries run in parallel: one installs, the others wait for it.
  exec 9>"${TMPDIR:-/tmp}/contractd-postgres-install.lock"
  flock 9
  if [ -z "$(bindir)" ]; then
    log "installing postgresql (apt-get)"
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get -o DPkg::Lock::Timeout=600 update -qq >&2
    # The package's own cluster is not used: tests run their own in a temp dir.
    $sudo apt-get -o DPkg::Lock::Timeout=600 install -y -qq postgresql >&2
  fi
  flock -u 9
  if [ -z "$(bindir)" ]; then
    log "postgresql installed but no server binaries under /usr/lib/postgresql/*/bin"
    exit 1
  fi
  # Debian starts a cluster on 5432 after install; tests never use it.
}

# as_user CMD...: run CMD as the unprivileged owner (as ourselves when not root).
as_user() {
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u "$PG_USER" -- "$@"
  else
    "$@"
  fi
}

ensure_user() {
  [ "$(id -u)" -eq 0 ] || return 0
  if ! id -u "$PG_USER" >/dev/null 2>&1; then
    useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$PG_USER" >&2
  fi
}

port_free() {
  ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

start() {
  install
  ensure_user
  local bin dir port try
  bin="$(bindir)"
  dir="$(mktemp -d "${TMPDIR:-/tmp}/contractd-pg.XXXXXX")"
  chmod 0755 "$dir"
  mkdir -p "$dir/data" "$dir/run"
  if [ "$(id -u)" -eq 0 ]; then
    chown -R "$PG_USER" "$dir"
  fi
  chmod 0700 "$dir/data"
  # trust on loopback only: a throwaway server with fake data, no password to leak.
  if ! as_user "$bin/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --locale=C.UTF-8 --no-sync >"$dir/initdb.log" 2>&1; then
    log "initdb failed:"; cat "$dir/initdb.log" >&2; rm -rf "$dir"; exit 1
  fi
  for try in $(seq 1 20); do
    port=$(( 20000 + (RANDOM * 32768 + RANDOM) % 40000 ))
    port_free "$port" || continue
    if server_start "$bin" "$dir" "$port"; then
      echo "$port" >"$dir/port"
      echo "CONTRACTD_TEST_PG_DSN=postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
      echo "CONTRACTD_TEST_PG_DIR=$dir"
      return 0
    fi
    # Another process took the port between the check and the bind: try another.
    tail -n 3 "$dir/server.log" >&2 2>/dev/null || true
  done
  log "could not start PostgreSQL (see $dir/server.log)"
  exit 1
}

server_start() {
  as_user "$1/pg_ctl" -D "$2/data" -l "$2/server.log" -w -t 60 -s \
    -o "-c listen_addresses=127.0.0.1 -p $3 -c unix_socket_directories=$2/run -c max_connections=300 -c shared_buffers=64MB -c fsync=on" \
    start >&2
}

ours() {
  case "$1" in
    "${TMPDIR:-/tmp}"/contractd-pg.*) [ -d "$1/data" ] ;;
    *) false ;;
  esac
}

pause() {
  ours "${1:-}" || { log "pause needs the DIR that start printed"; exit 2; }
  as_user "$(bindir)/pg_ctl" -D "$1/data" -m fast -w -t 30 -s stop >&2
}

resume() {
  ours "${1:-}" || { log "resume needs the DIR that start printed"; exit 2; }
  server_start "$(bindir)" "$1" "$(cat "$1/port")"
}

watch() {
  ours "${1:-}" || exit 0
  while kill -0 "$2" 2>/dev/null && [ -d "$1" ]; do sleep 1; done
  if [ -d "$1" ]; then stop "$1"; fi
}

stop() {
  local dir="${1:-${CONTRACTD_TEST_PG_DIR:-}}" bin
  if [ -z "$dir" ]; then
    log "stop needs the DIR that start printed"; exit 2
  fi
  case "$dir" in
    "${TMPDIR:-/tmp}"/contractd-pg.*) ;;
    *) log "refusing to remove $dir: not a directory this script made"; exit 2 ;;
  esac
  bin="$(bindir)"
  if [ -n "$bin" ] && [ -f "$dir/data/postmaster.pid" ]; then
    as_user "$bin/pg_ctl" -D "$dir/data" -m immediate -w -t 30 -s stop >&2 || true
  fi
  rm -rf "$dir"
}

case "${1:-}" in
  install) install ;;
  start) start ;;
  stop) stop "${2:-}" ;;
  pause) pause "${2:-}" ;;
  resume) resume "${2:-}" ;;
  watch) watch "${2:-}" "${3:?watch needs DIR PID}" ;;
  *) echo "usage: $0 install | start | stop DIR | pause DIR | resume DIR" >&2; exit 2 ;;
esac
