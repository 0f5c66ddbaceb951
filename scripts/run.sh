#!/usr/bin/env bash
# make run: contractd with examples/demo/contractd.yaml in front of
# contractd-sim (a simulated model), left running in the foreground. Prints
# curl and SDK lines to try; contractd's audit events appear below them as
# requests arrive. Ctrl-C stops both.
. "$(dirname "$0")/lib.sh"
API=http://127.0.0.1:$API_PORT
ADMIN=http://127.0.0.1:$ADMIN_PORT
SIM_FAILURE_RATE="${SIM_FAILURE_RATE:-0.25}"
SIM_LATENCY="${SIM_LATENCY:-150ms}"
prepare run

logs="$(mktemp -d "${TMPDIR:-/tmp}/contractd-run.XXXXXX")"
sim_pid=""
cd_pid=""
stop_all() {
  trap - INT TERM EXIT
  stop_pids $cd_pid $sim_pid
  echo
  echo "run: stopped. Logs: $logs"
}
trap 'stop_all; exit 0' INT TERM
trap stop_all EXIT

bin/contractd-sim -config "$CONFIG" -addr "$SIM_ADDR" -seed "$SIM_SEED" \
  -failure-rate "$SIM_FAILURE_RATE" -latency "$SIM_LATENCY" -jitter 100ms 2>"$logs/sim.log" &
sim_pid=$!
# Audit events (sink: stdout) go to this terminal; server logs to a file.
bin/contractd serve -c "$CONFIG" 2>"$logs/contractd.log" &
cd_pid=$!

if ! bin/contractd-demo -config "$CONFIG" -wait-only -wait 30s; then
  echo "run: contractd or the simulator did not start; see $logs/contractd.log and $logs/sim.log" >&2
  tail -n 5 "$logs/contractd.log" "$logs/sim.log" >&2 || true
  exit 1
fi

cat <<EOF

contractd is running on $API in front of contractd-sim (a simulated model on http://$SIM_ADDR).
Admin: $ADMIN/healthz  $ADMIN/readyz  $ADMIN/metrics        Logs: $logs
Routes: curl -s $API/v1/models
The simulator fails ${SIM_FAILURE_RATE} of requests at temperature > 0 (a fifth of that at 0); add
"sim_mode" to a chat completions body (/v1/responses refuses it) to force one: valid, fence, prose, trailing_comma, extra_key, missing_required,
wrong_label, bad_evidence, two_questions, truncated, refusal, empty, duplicate_key, or hot:MODE
(fails at temperature > 0, valid at 0, so the retry repairs it).

# Classify an e-mail (input object as contract_input; evidence must quote the body):
curl -s $API/v1/chat/completions -H 'Content-Type: application/json' -d '{
  "model": "classify-email",
  "contract_input": {"subject": "Broken window", "body": "Hello, the storm last night broke our living room window. My home policy is HP-1002-3344. Please advise. Anna Roth"},
  "messages": []}'

# The same, with a wrong label on attempt 1 that the retry at temperature 0 repairs (see "attempts": 2):
curl -s $API/v1/chat/completions -H 'Content-Type: application/json' -d '{
  "model": "classify-email", "sim_mode": "hot:wrong_label",
  "contract_input": {"subject": "Broken window", "body": "The storm broke our window. Policy HP-1002-3344."},
  "messages": []}'

# A model that keeps wrapping its JSON in a Markdown fence: 422 needs_review with every attempt's violations:
curl -s $API/v1/chat/completions -H 'Content-Type: application/json' -d '{
  "model": "answer-json-retry", "sim_mode": "fence",
  "messages": [{"role": "user", "content": "How do I rotate the API key for staging without downtime?"}]}'

# Route by path, streaming (SSE after the verdict):
curl -sN $API/r/ask-one-question/v1/chat/completions -H 'Content-Type: application/json' -d '{
  "stream": true, "messages": [{"role": "user", "content": "Move my subscription to the other workspace."}]}'

# Python (pip install openai):
python3 - <<'PY'
from openai import OpenAI, UnprocessableEntityError
client = OpenAI(base_url="$API/v1", api_key="unused")
r = client.chat.completions.create(
    model="guardian-report",
    messages=[],
    extra_body={"contract_input": {
        "user_query": "How many stories are in progress for the platform team?",
        "request_type": "STATUS_METRIC",
        "architect_spec": {"response_format": "json", "domain_terms": ["in progress"],
                           "forbidden_content": [], "required_sections": ["count"]},
        "evidence": [{"source": "db", "ref": "stories", "snippet": "count: 14", "confidence": 0.97}],
        "draft_answer": "{\"count\": 14}"}, "sim_mode": "hot:wrong_label"},
)
print(r.choices[0].message.content)
try:
    client.chat.completions.create(model="answer-json", extra_body={"sim_mode": "prose"},
        messages=[{"role": "user", "content": "How do I rotate the API key?"}])
except UnprocessableEntityError as e:
    print(e.status_code, e.body["review"]["attempts"][0]["violations"])
PY

# Node (npm install openai), as an ES module (save as try.mjs, then: node try.mjs):
import OpenAI from "openai";
const client = new OpenAI({ baseURL: "$API/v1", apiKey: "unused" });
const r = await client.chat.completions.create({
  model: "analyst-plan", messages: [],
  contract_input: { user_query: "How many stories are in progress for the platform team?" },
});
console.log(r.choices[0].message.content, r.contract);
try {
  await client.chat.completions.create({ model: "answer-json", sim_mode: "prose",
    messages: [{ role: "user", content: "How do I rotate the API key?" }] });
} catch (e) { console.log(e.status, e.error.review.attempts[0].violations); }

Audit events follow as requests arrive. Ctrl-C stops contractd and the simulator.
EOF

# Foreground until Ctrl-C or until either process exits. Ctrl-C reaches both
# servers too (same process group): they drain and exit at once.
wait -n "$sim_pid" "$cd_pid" || true
sleep 0.5
if kill -0 "$sim_pid" 2>/dev/null || kill -0 "$cd_pid" 2>/dev/null; then
  echo "run: a process exited unexpectedly; stopping (logs: $logs)" >&2
  exit 1
fi
exit 0
