// Typed clients against contractd: the route's schema as zod (GET
// /v1/models/{route} through the schema-to-zod snippet), the
// X-Contract-Schema-Replaced header, and the AI SDK's error message naming
// the review. Run by scripts/e2e-node.sh (see sdk.test.mjs).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync, rmSync } from 'node:fs';
import OpenAI from 'openai';
import { zodResponseFormat, zodTextFormat } from 'openai/helpers/zod';
import { jsonSchemaToZod } from 'json-schema-to-zod';
import { z } from 'zod';
import { generateObject } from 'ai';
import * as toZod from '../snippets/schema-to-zod.mjs';
import * as ai from '../snippets/ai-sdk.mjs';

const baseURL = process.env.CONTRACTD_BASE_URL;
const clientKey = process.env.CONTRACTD_CLIENT_KEY;
const upstreamURL = process.env.FAKE_UPSTREAM_URL;
assert.ok(baseURL && clientKey && upstreamURL, 'run these tests with scripts/e2e-node.sh');

const client = new OpenAI({ baseURL, apiKey: clientKey, maxRetries: 0 });
const GOOD = { sentiment: 'positive', summary: 'Fast delivery and great food.' };
// sentiment_v1 as scripts/e2e-node.sh configures it
const CONTRACT_SCHEMA = {
  type: 'object', required: ['sentiment', 'summary'], additionalProperties: false,
  properties: { sentiment: { type: 'string' }, summary: { type: 'string', maxLength: 200 } },
};

// importSource loads generated zod source as a module (written beside the
// tests so its `import { z } from "zod"` resolves to the pinned zod).
async function importSource(src) {
  const file = new URL(`./.generated-${process.pid}-${Date.now()}.mjs`, import.meta.url);
  writeFileSync(file, src);
  try {
    return await import(file.href);
  } finally {
    rmSync(file, { force: true });
  }
}

test('models.retrieve(route) is the contract the route enforces', async () => {
  const c = await toZod.routeContract(client, 'review-sentiment');
  assert.equal(c.name, 'sentiment_v1');
  assert.match(c.sha256, /^[0-9a-f]{64}$/);
  assert.deepEqual(c.schema, CONTRACT_SCHEMA);
  assert.equal(await toZod.routeContract(client, 'raw'), null, 'passthrough: no contract');
  // the /r/{route}/v1 base URL of the same route
  const pinned = new OpenAI({ baseURL: baseURL.replace(/\/v1$/, '/r/review-sentiment/v1'), apiKey: clientKey, maxRetries: 0 });
  assert.equal((await toZod.routeContract(pinned, 'review-sentiment')).sha256, c.sha256);
  await assert.rejects(toZod.routeContract(pinned, 'review-always-bad'), (err) => err.status === 404);
});

test('zod from the route\'s schema: parse works over chat and Responses, no schema replaced', async () => {
  const { schema } = await toZod.routeContract(client, 'review-sentiment');
  const { Sentiment } = await importSource(toZod.zodModule(schema, 'Sentiment'));
  const { data, response } = await client.chat.completions.parse({
    model: 'review-sentiment',
    messages: [{ role: 'user', content: JSON.stringify({ text: 'Great.' }) }],
    response_format: zodResponseFormat(Sentiment, 'sentiment'),
  }).withResponse();
  assert.deepEqual(data.choices[0].message.parsed, GOOD);
  assert.equal(response.headers.get('x-contract-schema-replaced'), null, 'the converted schema is the route\'s');
  const r = await client.responses.parse({
    model: 'review-sentiment', input: JSON.stringify({ text: 'Great.' }), text: { format: zodTextFormat(Sentiment, 'sentiment') },
  }).withResponse();
  assert.deepEqual(r.data.output_parsed, GOOD);
  assert.equal(r.response.headers.get('x-contract-schema-replaced'), null);
});

test('zod spellings: optional properties must be .nullish() for the official SDK', async () => {
  const schema = { type: 'object', required: ['a'], additionalProperties: false,
    properties: { a: { type: 'string' }, b: { type: 'string' }, c: { type: 'object', properties: { d: { type: 'integer' } } } } };
  // the converter's plain output spells b .optional(): the SDK refuses it before sending anything
  const plain = await importSource(jsonSchemaToZod(schema, { module: 'esm', name: 'S' }));
  assert.throws(() => zodResponseFormat(plain.S, 's'), /\.optional\(\)` without `\.nullable\(\)/);
  // the snippet's output: accepted, and it parses an object that leaves b and c out, or sends them null
  const { S } = await importSource(toZod.zodModule(schema, 'S'));
  const strict = zodResponseFormat(S, 's').json_schema.schema;
  assert.deepEqual(strict.required.sort(), ['a', 'b', 'c']);
  assert.ok(S.safeParse({ a: 'x' }).success);
  assert.ok(S.safeParse({ a: 'x', b: null, c: { d: null } }).success);
  assert.ok(!S.safeParse({ b: 'x' }).success, 'a required property stays required');
  assert.ok(!z.object({ a: z.string(), b: z.string().nullable() }).safeParse({ a: 'x' }).success, '.nullable() alone rejects a missing b');
});

test('a client schema that differs from the route\'s: X-Contract-Schema-Replaced, never a block', async () => {
  const Other = z.object({ sentiment: z.string(), summary: z.string(), confidence: z.number() });
  const { data, response } = await client.chat.completions.create({
    model: 'review-sentiment',
    messages: [{ role: 'user', content: JSON.stringify({ text: 'Great.' }) }],
    response_format: zodResponseFormat(Other, 'other'),
  }).withResponse();
  assert.equal(response.status, 200);
  assert.equal(response.headers.get('x-contract-schema-replaced'), 'true');
  assert.deepEqual(JSON.parse(data.choices[0].message.content), GOOD, 'the route\'s contract decided');
  const r = await client.responses.create({
    model: 'review-sentiment', input: JSON.stringify({ text: 'Great.' }), text: { format: zodTextFormat(Other, 'other') },
  }).withResponse();
  assert.equal(r.response.headers.get('x-contract-schema-replaced'), 'true');
});

test('ai: the error message names the review (AI SDK users keep only the message)', async () => {
  const provider = ai.contractdProvider(baseURL, clientKey);
  for (const model of [provider.chat('review-always-bad'), provider.responses('review-always-bad')]) {
    let caught;
    try {
      // default maxRetries: the AI SDK does not retry a 422
      await generateObject({ model, schema: ai.Sentiment, prompt: JSON.stringify({ text: `Cold soup ${Date.now()}.` }) });
    } catch (err) {
      caught = err;
    }
    const { reviewId } = ai.reviewOf(caught);
    assert.match(caught.message, new RegExp(`^needs review ${reviewId}: 2 attempts failed \\(\\S+ at \\S+\\); GET /v1/reviews/${reviewId}$`));
    // and the review is there for whoever holds only that message
    const path = caught.message.match(/GET (\/v1\/reviews\/\S+)$/)[1];
    const res = await fetch(baseURL.replace(/\/v1$/, '') + path, { headers: { authorization: `Bearer ${clientKey}` } });
    assert.equal(res.status, 200);
    assert.equal((await res.json()).status, 'pending');
  }
});
