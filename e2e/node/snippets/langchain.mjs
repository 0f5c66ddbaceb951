// LangChain JS (@langchain/openai) against contractd: withStructuredOutput
// with method 'jsonSchema' or 'jsonMode'. 'functionCalling' sends tools,
// which contract routes refuse (400 unsupported_parameter).
import { ChatOpenAI } from '@langchain/openai';
import OpenAI from 'openai';
import { z } from 'zod';

export const Sentiment = z.object({ sentiment: z.enum(['positive', 'negative', 'neutral']), summary: z.string() });

export function contractdModel(baseURL, apiKey, route) {
  // maxRetries: 0 — LangChain retries every status but 400-409 by default, a 422 included.
  return new ChatOpenAI({ model: route, apiKey, configuration: { baseURL }, maxRetries: 0 });
}

export async function classify(llm, text, method = 'jsonSchema') {
  const structured = llm.withStructuredOutput(Sentiment, { method });
  return structured.invoke([{ role: 'user', content: JSON.stringify({ text }) }]);
}

export async function classifyStream(llm, text, method = 'jsonSchema') {
  const structured = llm.withStructuredOutput(Sentiment, { method });
  let last;
  for await (const chunk of await structured.stream([{ role: 'user', content: JSON.stringify({ text }) }])) last = chunk;
  return last;
}

// A needs_review is the openai package's APIError with status 422.
export function reviewOf(err) {
  if (err instanceof OpenAI.APIError && err.status === 422) {
    return { code: err.code, reviewId: err.error.review.id };
  }
  throw err;
}
