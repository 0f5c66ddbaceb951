// The structured-output clients people use, unchanged, against contractd
// (run by scripts/e2e-node.sh; see sdk.test.mjs for the environment). Each
// client's snippet (../snippets/, shown in docs/clients.md) is what runs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import * as oa from '../snippets/openai.mjs';
import * as ai from '../snippets/ai-sdk.mjs';
import * as lc from '../snippets/langchain.mjs';

const baseURL = process.env.CONTRACTD_BASE_URL;
const clientKey = process.env.CONTRACTD_CLIENT_KEY;
const upstreamURL = process.env.FAKE_UPSTREAM_URL;
assert.ok(baseURL && clientKey && upstreamURL, 'run these tests with scripts/e2e-node.sh');

const TEXT = 'The delivery was fast and the food was great.';
const GOOD = { sentiment: 'positive', summary: 'Fast delivery and great food.' };
const GOOD_ROUTE = 'review-sentiment';
const BAD_ROUTE = 'review-always-bad';

// needsReview runs fn against the always-bad route and checks the client's
// own error carries 422, the code and a review id that contractd's audit
// knows (it is the request id).
async function needsReview(fn, reviewOf) {
  let caught;
  try {
    await fn();
  } catch (err) {
    caught = err;
  }
  assert.ok(caught, 'a needs_review route must throw');
  const r = reviewOf(caught);
  assert.equal(r.code, 'contract_violation');
  assert.match(r.reviewId, /^req_[0-9a-f]{24}$/);
  return caught;
}

async function upstreamBodies(since) {
  const res = await fetch(`${upstreamURL}/_e2e/requests`);
  return (await res.json()).slice(since).map((r) => ({ path: r.path, body: JSON.parse(r.body) }));
}
async function upstreamCount() {
  const res = await fetch(`${upstreamURL}/_e2e/requests`);
  return (await res.json()).length;
}

// ------------------------------------------------------------------ openai
const client = oa.contractdClient(baseURL, clientKey);

test('openai: chat.completions.parse with zodResponseFormat', async () => {
  const parsed = await oa.viaChat(client, GOOD_ROUTE, TEXT);
  assert.deepEqual(parsed, GOOD);
  const err = await needsReview(() => oa.viaChat(client, BAD_ROUTE, TEXT), oa.reviewOf);
  assert.ok(err instanceof OpenAI.UnprocessableEntityError);
});

test('openai: responses.parse with zodTextFormat', async () => {
  const n = await upstreamCount();
  assert.deepEqual(await oa.viaResponses(client, GOOD_ROUTE, TEXT), GOOD);
  // contractd ran the chat attempt plan upstream; the client's format was replaced by the route's.
  const [call] = await upstreamBodies(n);
  assert.equal(call.path, '/v1/chat/completions');
  assert.equal(call.body.model, 'fake-good');
  assert.equal(call.body.messages.at(-1).content, `Review: ${TEXT}\n`); // the route's user template
  assert.equal(call.body.text, undefined);
  assert.equal(call.body.input, undefined);
  const err = await needsReview(() => oa.viaResponses(client, BAD_ROUTE, TEXT), oa.reviewOf);
  assert.ok(err instanceof OpenAI.UnprocessableEntityError);
});

test('openai: the raw response object', async () => {
  const { data, response } = await client.responses.create({ model: GOOD_ROUTE, input: JSON.stringify({ text: TEXT }) }).withResponse();
  assert.equal(data.object, 'response');
  assert.equal(data.status, 'completed');
  assert.equal(data.id, `resp_${response.headers.get('x-request-id')}`);
  assert.equal(data.output_text, JSON.stringify(GOOD));
  assert.equal(data.model, 'fake-good-2024-01-01');
  assert.deepEqual(data.usage && [data.usage.input_tokens, data.usage.output_tokens, data.usage.total_tokens], [50, 10, 60]);
  assert.equal(data.contract.route, GOOD_ROUTE);
  assert.equal(response.headers.get('x-contract-attempts'), '1');
});

test('openai: responses.stream', async () => {
  let deltas = '';
  const parsed = await oa.viaResponsesStream(client, GOOD_ROUTE, TEXT, (d) => { deltas += d; });
  assert.deepEqual(parsed, GOOD);
  assert.equal(deltas, JSON.stringify(GOOD));
  // verdict first: a needs_review stream is the same 422, never a stream
  await needsReview(() => oa.viaResponsesStream(client, BAD_ROUTE, TEXT), oa.reviewOf);
});

test('openai: Responses-only refusals are 400 unsupported_parameter', async () => {
  await assert.rejects(
    client.responses.create({ model: GOOD_ROUTE, input: 'x', previous_response_id: 'resp_1' }),
    (err) => err instanceof OpenAI.BadRequestError && err.code === 'unsupported_parameter' && err.param === 'previous_response_id',
  );
});

// contractd keeps no response (store is accepted and ignored): the calls on
// a response by its id are each a NotFoundError, code response_not_found,
// whose message says so (before: not_found, "no such endpoint").
test('openai: responses.retrieve, delete, inputItems.list and cancel are 404 response_not_found', async () => {
  const { id } = await client.responses.create({ model: GOOD_ROUTE, input: JSON.stringify({ text: TEXT }) });
  const notStored = (err) => err instanceof OpenAI.NotFoundError && err.status === 404 && err.type === 'invalid_request_error' &&
    err.code === 'response_not_found' && err.message.includes(id) && err.message.includes('does not store responses');
  await assert.rejects(client.responses.retrieve(id), notStored, 'retrieve');
  await assert.rejects(client.responses.delete(id), notStored, 'delete');
  await assert.rejects(client.responses.inputItems.list(id), notStored, 'inputItems.list');
  await assert.rejects(client.responses.cancel(id), notStored, 'cancel');
});

// ------------------------------------------------------------- ai + @ai-sdk
const provider = ai.contractdProvider(baseURL, clientKey);

for (const [api, model] of [['chat', (r) => provider.chat(r)], ['responses', (r) => provider.responses(r)], ['default', (r) => provider(r)]]) {
  test(`ai: generateObject over ${api}`, async () => {
    const n = await upstreamCount();
    assert.deepEqual(await ai.generate(model(GOOD_ROUTE), TEXT), GOOD);
    assert.equal((await upstreamBodies(n))[0].path, '/v1/chat/completions');
    await needsReview(() => ai.generate(model(BAD_ROUTE), TEXT), ai.reviewOf);
  });

  test(`ai: streamObject over ${api}`, async () => {
    const partials = [];
    assert.deepEqual(await ai.stream(model(GOOD_ROUTE), TEXT, (p) => partials.push(p)), GOOD);
    assert.deepEqual(partials.at(-1), GOOD);
    await needsReview(() => ai.stream(model(BAD_ROUTE), TEXT), ai.reviewOf);
  });
}

// ------------------------------------------------------------- LangChain
for (const method of ['jsonSchema', 'jsonMode']) {
  test(`langchain: withStructuredOutput ${method}`, async () => {
    assert.deepEqual(await lc.classify(lc.contractdModel(baseURL, clientKey, GOOD_ROUTE), TEXT, method), GOOD);
    const n = await upstreamCount();
    await needsReview(() => lc.classify(lc.contractdModel(baseURL, clientKey, BAD_ROUTE), TEXT, method), lc.reviewOf);
    assert.equal((await upstreamBodies(n)).length, 2, 'one request, its two attempts: no client retry of the 422');
  });

  test(`langchain: withStructuredOutput ${method} streaming`, async () => {
    assert.deepEqual(await lc.classifyStream(lc.contractdModel(baseURL, clientKey, GOOD_ROUTE), TEXT, method), GOOD);
    await needsReview(() => lc.classifyStream(lc.contractdModel(baseURL, clientKey, BAD_ROUTE), TEXT, method), lc.reviewOf);
  });
}

test('langchain: functionCalling is refused (tools on a contract route)', async () => {
  const n = await upstreamCount();
  await assert.rejects(
    lc.classify(lc.contractdModel(baseURL, clientKey, GOOD_ROUTE), TEXT, 'functionCalling'),
    (err) => err instanceof OpenAI.BadRequestError && err.code === 'unsupported_parameter' && err.param === 'tools',
  );
  assert.equal(await upstreamCount(), n, 'nothing reached the upstream');
});

// ------------------------------------------------------------- passthrough
test('openai: Responses on a passthrough route are relayed, streams event by event', async () => {
  const n = await upstreamCount();
  const r = await client.responses.create({ model: 'raw', input: 'hi', tools: [{ type: 'web_search' }] });
  assert.equal(r.id, 'resp_fake');
  assert.equal(r.output_text, 'echo: hi');
  const [call] = await upstreamBodies(n);
  assert.equal(call.path, '/v1/responses');
  assert.deepEqual(call.body, { model: 'fake-raw', input: 'hi', tools: [{ type: 'web_search' }] }, 'untouched but for model');
  const types = [];
  let text = '';
  for await (const e of await client.responses.create({ model: 'raw', input: 'hi', stream: true })) {
    types.push(e.type);
    if (e.type === 'response.output_text.delta') text += e.delta;
  }
  assert.deepEqual(types, ['response.created', 'response.output_text.delta', 'response.completed']);
  assert.equal(text, 'echo: hi');
});

test('openai: a passthrough Responses stream that breaks off raises an APIError, not a clean end', async () => {
  // The fake upstream ends its body inside the second event: contractd
  // relays the whole first event, drops the torn one and ends with an
  // error event, which the SDK raises.
  const types = [];
  await assert.rejects(async () => {
    for await (const e of await client.responses.create({ model: 'raw', input: 'break', stream: true })) types.push(e.type);
  }, (err) => err instanceof OpenAI.APIError && err.code === 'upstream_error' && err.type === 'upstream_error');
  assert.deepEqual(types, ['response.created']);
});
