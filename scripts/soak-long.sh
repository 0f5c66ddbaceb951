#!/usr/bin/env bash
# A long soak at a low steady rate: does anything grow without bound?
# (docs/benchmarks.md, "Limits under load", session 14). Not part of
# `make test` or `make soak`: it runs for DURATION.
#
#   scripts/soak-long.sh [sqlite|replicas] [DURATION] [RATE]
#
# sqlite: one contractd on a sqlite store. replicas: two on a throwaway
# PostgreSQL (scripts/postgres.sh) and Redis (scripts/redis.sh), stopped and
# removed at the end. DURATION defaults to 17m, RATE (events a second; about
# 1.5 x as many requests) to 18. bin/contractd must be built (make soak-long
# builds it). The samples, the last /metrics scrape and each process's log
# (ending with its goroutines' stacks) are kept in a temporary directory
# the command names; see scripts/soaklong for what is sent and sampled.
set -euo pipefail
cd "$(dirname "$0")/.."

mode="${1:-sqlite}"
dur="${2:-17m}"
rate="${3:-18}"
args=(-bin "$PWD/bin/contractd" -mode "$mode" -dur "$dur" -rate "$rate")

case "$mode" in
  sqlite) ;;
  replicas)
    eval "$(scripts/postgres.sh start)"
    pgdir="$CONTRACTD_TEST_PG_DIR"
    # redis.sh runs until its stdin closes: the coprocess's input, closed
    # when this script exits.
    coproc REDIS { scripts/redis.sh; }
    redis_in="${REDIS[1]}"
    trap 'exec {redis_in}>&-; wait; scripts/postgres.sh stop "$pgdir"' EXIT
    read -r redis_url <&"${REDIS[0]}"
    args+=(-pg "$CONTRACTD_TEST_PG_DSN" -redis "$redis_url" -replicas 2)
    ;;
  *) echo "usage: scripts/soak-long.sh [sqlite|replicas] [DURATION] [RATE]" >&2; exit 2 ;;
esac

go run ./scripts/soaklong "${args[@]}"
