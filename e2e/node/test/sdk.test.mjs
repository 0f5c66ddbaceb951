// End-to-end tests of contractd with the official openai npm package.
// scripts/e2e-node.sh starts the fake upstream and contractd, then runs
// these with:
//   CONTRACTD_BASE_URL   http://127.0.0.1:PORT/v1 (contractd's API)
//   CONTRACTD_CLIENT_KEY the client key contractd accepts
//   FAKE_UPSTREAM_URL    http://127.0.0.1:PORT (the fake upstream)
//   UPSTREAM_KEY         the key contractd must send upstream
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { GOOD_CONTENT, BAD_CONTENT } from '../fixtures.mjs';

function env(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run these tests with scripts/e2e-node.sh`);
  return v;
}

const baseURL = env('CONTRACTD_BASE_URL');
const clientKey = env('CONTRACTD_CLIENT_KEY');
const upstreamURL = env('FAKE_UPSTREAM_URL');
const upstreamKey = env('UPSTREAM_KEY');

const client = new OpenAI({ apiKey: clientKey, baseURL, maxRetries: 0, timeout: 20_000 });

const TEXT = 'The delivery was fast and the food was great.';

function reviewParams(model, extra = {}) {
  return {
    model,
    temperature: 1.3, // the route's replaces it
    messages: [{ role: 'user', content: JSON.stringify({ text: TEXT }) }],
    ...extra,
  };
}

async function upstreamRequests() {
  const res = await fetch(`${upstreamURL}/_e2e/requests`);
  assert.equal(res.status, 200);
  return res.json();
}

// The content of a normal call, shared with the streaming test.
let normalContent;

test('a normal call returns the accepted JSON', async () => {
  const { data, response } = await client.chat.completions.create(reviewParams('review-sentiment')).withResponse();
  assert.equal(data.object, 'chat.completion');
  assert.equal(data.choices.length, 1);
  const choice = data.choices[0];
  assert.equal(choice.message.role, 'assistant');
  assert.equal(choice.finish_reason, 'stop');
  assert.equal(choice.message.content, GOOD_CONTENT);
  assert.deepEqual(JSON.parse(choice.message.content), { sentiment: 'positive', summary: 'Fast delivery and great food.' });
  assert.equal(data.model, 'fake-good-2024-01-01', 'the model the upstream reported');
  assert.equal(data.usage.total_tokens, 60);
  // contractd's extra member and headers
  assert.equal(data.contract.route, 'review-sentiment');
  assert.equal(data.contract.contract, 'sentiment_v1');
  assert.equal(data.contract.attempts, 1);
  assert.deepEqual(data.contract.evidence, []);
  assert.match(data.contract.contract_sha256, /^[0-9a-f]{64}$/);
  assert.equal(response.headers.get('x-contract-route'), 'review-sentiment');
  assert.equal(response.headers.get('x-contract-attempts'), '1');
  assert.ok(response.headers.get('x-request-id'));
  normalContent = choice.message.content;
});

test('a streaming call: the joined deltas equal the normal content', async () => {
  const { data: stream, response } = await client.chat.completions
    .create(reviewParams('review-sentiment', { stream: true, stream_options: { include_usage: true } }))
    .withResponse();
  assert.match(response.headers.get('content-type'), /^text\/event-stream/);
  assert.equal(response.headers.get('x-contract-route'), 'review-sentiment');
  assert.equal(response.headers.get('x-contract-attempts'), '1');
  let joined = '';
  let finish = null;
  let usage = null;
  let chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    assert.equal(chunk.object, 'chat.completion.chunk');
    for (const c of chunk.choices) {
      joined += c.delta?.content ?? '';
      if (c.finish_reason) finish = c.finish_reason;
    }
    if (chunk.usage) usage = chunk.usage;
  }
  assert.ok(chunks >= 3, `${chunks} chunks`);
  const normal = normalContent ?? (await client.chat.completions.create(reviewParams('review-sentiment'))).choices[0].message.content;
  assert.equal(joined, normal);
  assert.equal(joined, GOOD_CONTENT);
  assert.equal(finish, 'stop');
  assert.equal(usage?.total_tokens, 60);
});

test('the stream helper (runner) gives the same final message', async () => {
  const runner = client.chat.completions.stream(reviewParams('review-sentiment'));
  const final = await runner.finalChatCompletion();
  assert.equal(final.choices[0].message.content, GOOD_CONTENT);
});

test('contract_input as an extra body field, with no messages', async () => {
  const data = await client.chat.completions.create({ model: 'review-sentiment', messages: [], contract_input: { text: TEXT } });
  assert.equal(data.choices[0].message.content, GOOD_CONTENT);
  const reqs = await upstreamRequests();
  const last = JSON.parse(reqs.at(-1).body);
  assert.equal(last.messages.at(-1).content, `Review: ${TEXT}\n`);
  assert.equal(last.contract_input, undefined, 'contract_input is not sent upstream');
});

function assertNeedsReview(err) {
  assert.ok(err instanceof OpenAI.APIError, `want an APIError, got ${err?.constructor?.name}: ${err}`);
  assert.ok(err instanceof OpenAI.UnprocessableEntityError);
  assert.equal(err.status, 422);
  assert.equal(err.type, 'needs_review');
  assert.equal(err.code, 'contract_violation');
  assert.equal(err.param, null);
  const review = err.error.review;
  assert.equal(review.id, err.requestID, 'review.id is the request id');
  assert.equal(review.route, 'review-always-bad');
  assert.equal(review.contract, 'sentiment_v1');
  assert.equal(review.attempts.length, 2);
  assert.deepEqual(review.attempts.map((a) => a.temperature), [0.7, 0]);
  for (const a of review.attempts) {
    assert.ok(a.violations.length > 0);
    assert.equal(a.violations[0].kind, 'parse');
  }
  assert.ok(!JSON.stringify(err.error).includes(BAD_CONTENT), 'the rejected output never reaches the client');
  assert.equal(err.headers.get('x-contract-attempts'), '2');
}

test('needs_review surfaces as the SDK APIError with status 422', async () => {
  await assert.rejects(client.chat.completions.create(reviewParams('review-always-bad')), (err) => {
    assertNeedsReview(err);
    return true;
  });
});

test('needs_review on a streaming call is the same APIError 422', async () => {
  await assert.rejects(
    (async () => {
      const stream = await client.chat.completions.create(reviewParams('review-always-bad', { stream: true }));
      for await (const _ of stream) {
        // a valid verdict would stream; needs_review must not
      }
    })(),
    (err) => {
      assertNeedsReview(err);
      return true;
    },
  );
});

test('a wrong client key is an AuthenticationError 401', async () => {
  const wrong = new OpenAI({ apiKey: 'sk-test-wrong', baseURL, maxRetries: 0, timeout: 20_000 });
  await assert.rejects(wrong.chat.completions.create(reviewParams('review-sentiment')), (err) => {
    assert.ok(err instanceof OpenAI.AuthenticationError);
    assert.equal(err.status, 401);
    assert.equal(err.code, 'invalid_api_key');
    return true;
  });
});

test('an unknown route is a NotFoundError 404', async () => {
  await assert.rejects(client.chat.completions.create(reviewParams('no-such-route')), (err) => {
    assert.ok(err instanceof OpenAI.NotFoundError);
    assert.equal(err.code, 'model_not_found');
    return true;
  });
});

test('models.list lists the routes', async () => {
  const ids = [];
  for await (const m of client.models.list()) ids.push(m.id);
  assert.ok(ids.includes('review-sentiment'), ids.join(','));
  assert.ok(ids.includes('review-always-bad'), ids.join(','));
});

test('the upstream saw its own key and never the client key', async () => {
  const reqs = await upstreamRequests();
  assert.ok(reqs.length >= 5, `${reqs.length} upstream requests`);
  for (const r of reqs) {
    assert.equal(r.headers.authorization, `Bearer ${upstreamKey}`);
    assert.ok(!JSON.stringify(r).includes(clientKey), `the client key reached the upstream: ${JSON.stringify(r)}`);
  }
});
