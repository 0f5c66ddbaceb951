// LangChain JS with its default retry settings against a needs_review
// route: it sends the 422's request again and again (it retries every
// status but 400-409, and ignores x-should-retry), and contractd answers
// every repeat from review.dedupe_window, so all of its retries together
// cost one upstream run of the route's 2 attempts. Run by
// scripts/e2e-node.sh (see sdk.test.mjs for the environment).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { register } from 'node:module';
import OpenAI from 'openai';
import { z } from 'zod';

register('../support/fast-backoff-hooks.mjs', import.meta.url);
const { ChatOpenAI } = await import('@langchain/openai');
const { calls: retryCalls } = await import('../support/p-retry-fast.mjs');

const baseURL = process.env.CONTRACTD_BASE_URL;
const clientKey = process.env.CONTRACTD_CLIENT_KEY;
const upstreamURL = process.env.FAKE_UPSTREAM_URL;
assert.ok(baseURL && clientKey && upstreamURL, 'run these tests with scripts/e2e-node.sh');

const Sentiment = z.object({ sentiment: z.enum(['positive', 'negative', 'neutral']), summary: z.string() });

async function upstreamCount() {
  const res = await fetch(`${upstreamURL}/_e2e/requests`);
  return (await res.json()).length;
}

for (const method of ['jsonSchema', 'jsonMode']) {
  test(`langchain: default retries (${method}) on a needs_review route cost one upstream run`, async () => {
    // A text no other test sends: the first request must really run.
    const text = `The soup was cold (retries ${method} ${process.pid} ${Date.now()}).`;
    const answers = [];
    const counting = async (url, init) => {
      const res = await fetch(url, init);
      answers.push({ status: res.status, dedup: res.headers.get('x-contract-deduplicated'), retry: res.headers.get('x-should-retry') });
      return res;
    };
    // No maxRetries: LangChain's default.
    const llm = new ChatOpenAI({ model: 'review-always-bad', apiKey: clientKey, configuration: { baseURL, fetch: counting } });
    const before = await upstreamCount();
    const calls = retryCalls.length;
    let caught;
    try {
      await llm.withStructuredOutput(Sentiment, { method }).invoke([{ role: 'user', content: JSON.stringify({ text }) }]);
    } catch (err) {
      caught = err;
    }
    assert.ok(caught instanceof OpenAI.APIError && caught.status === 422, `a 422, got ${caught}`);
    const [opts] = retryCalls.slice(calls);
    assert.deepEqual(opts, { retries: 6, minTimeout: undefined, factor: undefined }, 'LangChain\'s own retry settings');
    assert.equal(answers.length, 7, 'LangChain sent the request 7 times: once and its 6 default retries');
    assert.ok(answers.every((a) => a.status === 422 && a.retry === 'false'));
    assert.deepEqual(answers.map((a) => a.dedup), [null, 'true', 'true', 'true', 'true', 'true', 'true'], 'every retry answered from the dedupe window');
    assert.equal(await upstreamCount() - before, 2, 'one upstream run (the route\'s 2 attempts) for all 7');
    assert.match(caught.message, new RegExp(`needs review ${caught.error.review.id}: 2 attempts failed`));
  });
}
