// Vercel's ai with @ai-sdk/openai against contractd: generateObject and
// streamObject over chat completions (openai.chat) or the Responses API
// (openai.responses, the provider's default).
import { generateObject, streamObject, APICallError } from 'ai';
import { createOpenAI } from '@ai-sdk/openai';
import { z } from 'zod';

export const Sentiment = z.object({ sentiment: z.enum(['positive', 'negative', 'neutral']), summary: z.string() });

export function contractdProvider(baseURL, apiKey) {
  return createOpenAI({ baseURL, apiKey });
}

export async function generate(model, text) {
  // model: provider.chat('route') or provider.responses('route')
  const { object } = await generateObject({ model, schema: Sentiment, prompt: JSON.stringify({ text }), maxRetries: 0 });
  return object;
}

export async function stream(model, text, onPartial = () => {}) {
  let failure;
  const result = streamObject({
    model, schema: Sentiment, prompt: JSON.stringify({ text }), maxRetries: 0,
    onError: ({ error }) => { failure = error; },
  });
  for await (const partial of result.partialObjectStream) onPartial(partial);
  if (failure) throw failure;
  return result.object;
}

// A needs_review is an APICallError with statusCode 422.
export function reviewOf(err) {
  if (APICallError.isInstance(err) && err.statusCode === 422) {
    const { error } = JSON.parse(err.responseBody);
    return { code: error.code, reviewId: error.review.id };
  }
  throw err;
}
