#!/usr/bin/env bash
# make demo: contractd in front of contractd-sim (a simulated model) with
# examples/demo/contractd.yaml. Sends requests covering every seed contract
# (valid at once, repaired by the retry, needs_review), prints the outcomes
# and a summary of the audit events, checks that both agree, stops
# everything. Needs bin/contractd and bin/contractd-sim (make build).
. "$(dirname "$0")/lib.sh"
SIM_FAILURE_RATE="${SIM_FAILURE_RATE:-0.3}"
prepare demo

work="$(mktemp -d "${TMPDIR:-/tmp}/contractd-demo.XXXXXX")"
sim_pid=""
cd_pid=""
status=1
cleanup() {
  stop_pids $cd_pid $sim_pid
  if [ "$status" -ne 0 ]; then
    echo "demo: failed; logs kept in $work (sim.log, contractd.log, audit.jsonl)" >&2
    tail -n 5 "$work/sim.log" "$work/contractd.log" >&2 2>/dev/null || true
  else
    rm -rf "$work"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The demo's review store starts empty each run (make run keeps what it finds).
rm -f examples/demo/reviews.db examples/demo/reviews.db-wal examples/demo/reviews.db-shm examples/demo/review-spool.jsonl

echo "demo: starting contractd-sim on $SIM_ADDR (seed $SIM_SEED, failure rate $SIM_FAILURE_RATE) and contractd on 127.0.0.1:$API_PORT"
bin/contractd-sim -config "$CONFIG" -addr "$SIM_ADDR" -seed "$SIM_SEED" \
  -failure-rate "$SIM_FAILURE_RATE" -latency 20ms 2>"$work/sim.log" &
sim_pid=$!
bin/contractd serve -c "$CONFIG" >"$work/audit.jsonl" 2>"$work/contractd.log" &
cd_pid=$!

set +e
bin/contractd-demo -config "$CONFIG" -audit "$work/audit.jsonl" -wait 30s
status=$?
set -e
exit "$status"
