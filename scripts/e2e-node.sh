#!/usr/bin/env bash
# SDK end-to-end tests with real npm clients (make test-e2e): the official
# openai package, ai + @ai-sdk/openai, @langchain/openai, and
# json-schema-to-zod for typed clients.
#
# 1. npm ci in e2e/node (the committed lockfile; cached packages are used
#    when present, so a warm machine needs no network);
# 2. locate contractd: $CONTRACTD_BIN, else bin/contractd (make build's)
#    when it is newer than go.mod, go.sum and the non-test Go files of the
#    packages it is built from, else a fresh build in a temporary directory;
# 3. start the fake upstream (e2e/node/fake-upstream.mjs) and contractd on
#    free loopback ports, with the Go e2e suite's config
#    (e2e/testdata/contractd.yaml) in a temporary directory and fake keys only;
# 4. run `node --test`, then check that no key reached contractd's logs or
#    audit events; a trap stops both processes and removes the directory.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export GOTOOLCHAIN=local

for tool in node npm; do
  command -v "$tool" >/dev/null || { echo "e2e-node: $tool is required" >&2; exit 1; }
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/contractd-e2e-node.XXXXXX")
pids=()
cleanup() {
  local rc=$?
  for pid in "${pids[@]}"; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in "${pids[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  if [ "$rc" -ne 0 ]; then
    for f in upstream.log contractd.log audit.jsonl; do
      if [ -s "$tmp/$f" ]; then
        echo "--- $f (last 40 lines)" >&2
        tail -n 40 "$tmp/$f" >&2
      fi
    done
  fi
  rm -rf "$tmp"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# waitfor SECONDS COMMAND...: poll COMMAND every 0.1 s.
waitfor() {
  local n=$(( $1 * 10 )); shift
  for _ in $(seq "$n"); do
    if "$@"; then return 0; fi
    sleep 0.1
  done
  return 1
}

# 1. Dependencies from the lockfile.
echo "e2e-node: npm ci (e2e/node)"
(cd e2e/node && npm ci --prefer-offline --no-audit --no-fund --loglevel=error)

# 2. The binary.
bin=${CONTRACTD_BIN:-}
if [ -z "$bin" ]; then
  bin=bin/contractd
  newer=missing
  if [ -x "$bin" ]; then
    # the module's packages contractd is built from
    dirs=$(go list -deps -f '{{with .Module}}{{if .Main}}{{$.Dir}}{{end}}{{end}}' ./cmd/contractd 2>/dev/null || echo .)
    # shellcheck disable=SC2086 # one directory per word
    newer=$(find $dirs go.mod go.sum -maxdepth 1 \( -name '*.go' ! -name '*_test.go' -o -name 'go.*' \) \
      -newer "$bin" -print -quit 2>/dev/null || echo unknown)
  fi
  if [ -n "$newer" ]; then
    echo "e2e-node: building contractd"
    go build -trimpath -o "$tmp/contractd" ./cmd/contractd
    bin=$tmp/contractd
  fi
fi
echo "e2e-node: using $bin ($("$bin" version))"

# 3. The fake upstream and contractd, fake keys only.
client_key=sk-test-e2e-client
upstream_key=sk-test-e2e-upstream

node e2e/node/fake-upstream.mjs --addr-file "$tmp/upstream.addr" >"$tmp/upstream.log" 2>&1 &
pids+=($!)
waitfor 10 test -s "$tmp/upstream.addr" || { echo "e2e-node: the fake upstream did not start" >&2; exit 1; }
upstream_url=$(cat "$tmp/upstream.addr")

# The Go e2e suite's config, plus a passthrough route, with 256 KiB of
# max_inflight_bytes (helpers.test.mjs fills it to get a 503 server_busy).
sed -e "s|@UPSTREAM@|$upstream_url/v1|" \
  -e 's|^  api_keys_env: CONTRACTD_API_KEYS$|&\n  max_body_bytes: 262144\n  max_inflight_bytes: 262144|' \
  e2e/testdata/contractd.yaml >"$tmp/contractd.yaml"
grep -q '^  max_inflight_bytes: 262144$' "$tmp/contractd.yaml" || { echo "e2e-node: the config has no api_keys_env line to extend" >&2; exit 1; }
cat >>"$tmp/contractd.yaml" <<EOF
  - name: raw
    upstream: fake
    model: fake-raw
    passthrough: true
EOF

"$bin" validate -c "$tmp/contractd.yaml"

# A minimal environment: never the developer's real keys.
env -i PATH="$PATH" HOME="${HOME:-$tmp}" \
  CONTRACTD_API_KEYS="$client_key" OPENAI_API_KEY="$upstream_key" \
  "$bin" serve -c "$tmp/contractd.yaml" >"$tmp/audit.jsonl" 2>"$tmp/contractd.log" &
contractd_pid=$!
pids+=("$contractd_pid")
api_addr() { grep -m1 '"msg":"listening","kind":"api"' "$tmp/contractd.log" | sed -E 's/.*"addr":"([^"]+)".*/\1/'; }
listening() { [ -n "$(api_addr)" ]; }
waitfor 10 listening || { echo "e2e-node: contractd did not start listening" >&2; exit 1; }
api=$(api_addr)
echo "e2e-node: contractd on $api, fake upstream on $upstream_url"

# 4. The tests (bounded: 30 s each, 3 min in all).
run_tests=(node --test --test-concurrency=1 --test-reporter=spec --test-timeout=30000 test/sdk.test.mjs test/clients.test.mjs test/typed.test.mjs test/retries.test.mjs test/helpers.test.mjs)
if command -v timeout >/dev/null; then
  run_tests=(timeout 180 "${run_tests[@]}")
fi
(
  cd e2e/node
  env -u OPENAI_API_KEY -u OPENAI_BASE_URL -u OPENAI_ORG_ID -u OPENAI_PROJECT_ID \
    CONTRACTD_BASE_URL="http://$api/v1" CONTRACTD_CLIENT_KEY="$client_key" \
    FAKE_UPSTREAM_URL="$upstream_url" UPSTREAM_KEY="$upstream_key" \
    "${run_tests[@]}"
)

# Nothing secret in contractd's logs or audit events: they are shipped to
# places with wider access than the keys.
if grep -q -e "$client_key" -e "$upstream_key" "$tmp/contractd.log" "$tmp/audit.jsonl"; then
  echo "e2e-node: a key was written to contractd's logs or audit events" >&2
  exit 1
fi
grep -q '"outcome":"needs_review"' "$tmp/audit.jsonl" || { echo "e2e-node: no needs_review audit event" >&2; exit 1; }
for api in chat responses; do
  grep -q "\"api\":\"$api\",\"outcome\":\"needs_review\"" "$tmp/audit.jsonl" ||
    { echo "e2e-node: no needs_review audit event with api $api" >&2; exit 1; }
done

# A clean stop: SIGTERM drains and exits 0.
kill -TERM "$contractd_pid"
stopped() { ! kill -0 "$contractd_pid" 2>/dev/null; }
waitfor 10 stopped || { echo "e2e-node: contractd still running 10 s after SIGTERM" >&2; exit 1; }
rc=0
wait "$contractd_pid" || rc=$?
pids=("${pids[0]}") # contractd is gone; the trap stops the upstream
if [ "$rc" -ne 0 ]; then
  echo "e2e-node: contractd exited $rc after SIGTERM, want 0" >&2
  exit 1
fi
echo "e2e-node: ok"
