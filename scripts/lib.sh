# Shared by scripts/demo.sh and scripts/run.sh (sourced first, not run):
# strict mode, the repository root as the working directory, and the demo
# config with the addresses both serve it on.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export GOTOOLCHAIN=local
export GOFLAGS="${GOFLAGS:--mod=mod}"
GO="${GO:-go}"

CONFIG=examples/demo/contractd.yaml
SIM_ADDR=127.0.0.1:18181
API_PORT=18180
ADMIN_PORT=18190
SIM_SEED="${SIM_SEED:-7}"

# prepare NAME: the prebuilt servers exist, the demo driver is built, and
# the demo's ports on 127.0.0.1 are free.
prepare() {
  local name=$1 b p
  for b in bin/contractd bin/contractd-sim; do
    [ -x "$b" ] || { echo "$name: $b is missing; use 'make $name' (it builds first)" >&2; exit 1; }
  done
  "$GO" build -o bin/contractd-demo ./cmd/contractd-demo
  for p in "${SIM_ADDR##*:}" "$API_PORT" "$ADMIN_PORT"; do
    if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      echo "$name: port $p on 127.0.0.1 is in use (another 'make run' or 'make demo'?); stop it and retry" >&2
      exit 1
    fi
  done
}

# stop_pids PID...: SIGTERM (both servers drain and exit), SIGKILL after 10 s.
stop_pids() {
  local pid i
  for pid in "$@"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "$@"; do
    for i in $(seq 1 100); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
}
