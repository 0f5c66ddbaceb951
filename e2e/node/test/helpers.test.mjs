// The official openai package's newer helpers, unchanged, against contractd:
// parse with a plain JSON schema (no zod), the Responses stream helper's
// events and finalResponse(), and maxRetries waiting out a 503 server_busy's
// Retry-After. Run by scripts/e2e-node.sh (see sdk.test.mjs for the
// environment), which gives contractd a max_inflight_bytes of 256 KiB for
// the last test.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { GOOD_CONTENT } from '../fixtures.mjs';

const baseURL = process.env.CONTRACTD_BASE_URL;
const clientKey = process.env.CONTRACTD_CLIENT_KEY;
const upstreamURL = process.env.FAKE_UPSTREAM_URL;
assert.ok(baseURL && clientKey && upstreamURL, 'run these tests with scripts/e2e-node.sh');

const TEXT = 'The delivery was fast and the food was great.';
const GOOD = JSON.parse(GOOD_CONTENT);
const GOOD_ROUTE = 'review-sentiment';
const client = new OpenAI({ apiKey: clientKey, baseURL, maxRetries: 0, timeout: 20_000 });

// The route's contract schema, written by hand as a client would.
const schema = {
  type: 'object',
  required: ['sentiment', 'summary'],
  additionalProperties: false,
  properties: { sentiment: { type: 'string' }, summary: { type: 'string', maxLength: 200 } },
};

async function upstreamCount() {
  const res = await fetch(`${upstreamURL}/_e2e/requests`);
  return (await res.json()).length;
}

test('openai: chat.completions.parse and responses.parse with a plain JSON schema', async () => {
  const { data: chat, response: chatRes } = await client.chat.completions.parse({
    model: GOOD_ROUTE,
    messages: [{ role: 'user', content: JSON.stringify({ text: TEXT }) }],
    response_format: { type: 'json_schema', json_schema: { name: 'sentiment', schema, strict: true } },
  }).withResponse();
  assert.deepEqual(chat.choices[0].message.parsed, GOOD);
  assert.equal(chatRes.headers.get('x-contract-schema-replaced'), null, 'the route\'s own schema is not replaced');

  const { data: resp, response } = await client.responses.parse({
    model: GOOD_ROUTE,
    input: JSON.stringify({ text: TEXT }),
    text: { format: { type: 'json_schema', name: 'sentiment', schema, strict: true } },
  }).withResponse();
  assert.deepEqual(resp.output_parsed, GOOD);
  assert.equal(resp.id, `resp_${response.headers.get('x-request-id')}`);
  assert.equal(response.headers.get('x-contract-route'), GOOD_ROUTE);
  assert.equal(response.headers.get('x-contract-attempts'), '1');
  assert.equal(response.headers.get('x-contract-schema-replaced'), null);
});

test('openai: responses.stream gives the standard events in order and finalResponse()', async () => {
  const stream = client.responses.stream({
    model: GOOD_ROUTE,
    input: JSON.stringify({ text: TEXT }),
    text: { format: { type: 'json_schema', name: 'sentiment', schema, strict: true } },
    metadata: { ticket: 'T-42' },
    top_p: 0.9,
  });
  const events = [];
  for await (const ev of stream) {
    assert.equal(ev.sequence_number, events.length, `${ev.type}'s sequence_number`);
    events.push(ev.type);
  }
  assert.deepEqual(events, [
    'response.created', 'response.in_progress', 'response.output_item.added', 'response.content_part.added',
    'response.output_text.delta', 'response.output_text.done', 'response.content_part.done',
    'response.output_item.done', 'response.completed',
  ]);
  const final = await stream.finalResponse();
  assert.equal(final.status, 'completed');
  assert.equal(final.output_text, GOOD_CONTENT);
  // The stream helper parses only zod formats (openai's hasAutoParseableInput):
  // with a plain JSON schema output_parsed stays null, against OpenAI too.
  assert.equal(final.output_parsed, null);
  assert.deepEqual(JSON.parse(final.output_text), GOOD);
  assert.equal(final.usage.total_tokens, 60);
  assert.equal(final.contract.route, GOOD_ROUTE);
  // The members the SDK's Response type declares, which contractd fills in:
  // metadata and top_p as the client sent them, temperature as the accepted
  // attempt used it (the route's 0.7), instructions null (never sent upstream).
  assert.deepEqual(
    [final.tools, final.tool_choice, final.parallel_tool_calls, final.instructions, final.metadata, final.temperature, final.top_p],
    [[], 'none', false, null, { ticket: 'T-42' }, 0.7, 0.9],
  );
});

// holdInflightBytes sends a slow request (review-slow: the fake upstream
// answers after 2 s) whose body holds about 200 KB of contractd's 256 KiB
// max_inflight_bytes until it is answered, and once the request has
// reached the upstream returns { answered }, its response's promise
// (wrapped: an async function returning it would wait for it); what names
// it in the failure when it never reaches the upstream.
async function holdInflightBytes(what) {
  const before = await upstreamCount();
  const slow = fetch(`${baseURL}/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${clientKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'review-slow', user: 'x'.repeat(200_000), messages: [{ role: 'user', content: JSON.stringify({ text: TEXT }) }] }),
  });
  for (let i = 0; (await upstreamCount()) === before; i++) {
    assert.ok(i < 500, `${what} never reached the upstream`);
    await new Promise((r) => setTimeout(r, 10));
  }
  return { answered: slow };
}

test('openai: maxRetries waits out a 503 server_busy Retry-After, then gets the 200', async () => {
  // Beside a slow request holding 200 KB of max_inflight_bytes, the SDK's
  // 70 KB request does not fit.
  const { answered: slow } = await holdInflightBytes('the slow request');

  const answers = [];
  const recording = async (url, init) => {
    const headers = new Headers(init.headers);
    const res = await fetch(url, init);
    answers.push({ status: res.status, retryAfter: res.headers.get('retry-after'), idem: headers.get('idempotency-key'), at: Date.now() });
    return res;
  };
  const retrying = new OpenAI({ apiKey: clientKey, baseURL, maxRetries: 2, timeout: 20_000, fetch: recording });
  const { data, response } = await retrying.chat.completions.create({
    model: GOOD_ROUTE,
    user: 'y'.repeat(70_000),
    messages: [{ role: 'user', content: JSON.stringify({ text: TEXT }) }],
  }, { headers: { 'Idempotency-Key': 'idem-busy-1' } }).withResponse();
  assert.equal(data.choices[0].message.content, GOOD_CONTENT);
  assert.equal(response.status, 200);
  assert.deepEqual(answers.map((a) => a.status), [503, 200], 'one 503, then the retry\'s 200');
  assert.equal(answers[0].retryAfter, '1');
  assert.ok(answers[1].at - answers[0].at >= 900, `retried ${answers[1].at - answers[0].at} ms after the 503, before Retry-After's 1 s`);
  assert.deepEqual(answers.map((a) => a.idem), ['idem-busy-1', 'idem-busy-1'], 'the same idempotency key on the retry');
  assert.equal((await slow).status, 200);

  // With no retries the 503 is the SDK's typed error.
  const { answered: slow2 } = await holdInflightBytes('the second slow request');
  await assert.rejects(
    client.chat.completions.create({ model: GOOD_ROUTE, user: 'y'.repeat(70_000), messages: [{ role: 'user', content: JSON.stringify({ text: TEXT }) }] }),
    (err) => err instanceof OpenAI.InternalServerError && err.status === 503 && err.code === 'server_busy' && err.type === 'server_error',
  );
  assert.equal((await slow2).status, 200);
});
