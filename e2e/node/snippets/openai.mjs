// The official openai package against contractd: chat.completions.parse and
// responses.parse with zod formats, responses.stream. contractd enforces the
// route's contract; the zod schema only types the result on the client.
import OpenAI from 'openai';
import { zodResponseFormat, zodTextFormat } from 'openai/helpers/zod';
import { z } from 'zod';

export const Sentiment = z.object({ sentiment: z.enum(['positive', 'negative', 'neutral']), summary: z.string() });

export function contractdClient(baseURL, apiKey) {
  // maxRetries: 0 — a 422 needs_review is final; retrying it spends tokens again.
  return new OpenAI({ baseURL, apiKey, maxRetries: 0 });
}

export async function viaChat(client, route, text) {
  const completion = await client.chat.completions.parse({
    model: route, // the route name
    messages: [{ role: 'user', content: JSON.stringify({ text }) }],
    response_format: zodResponseFormat(Sentiment, 'sentiment'),
  });
  return completion.choices[0].message.parsed;
}

export async function viaResponses(client, route, text) {
  const response = await client.responses.parse({
    model: route,
    input: JSON.stringify({ text }),
    text: { format: zodTextFormat(Sentiment, 'sentiment') },
  });
  return response.output_parsed;
}

export async function viaResponsesStream(client, route, text, onDelta = () => {}) {
  const stream = client.responses.stream({
    model: route,
    input: JSON.stringify({ text }),
    text: { format: zodTextFormat(Sentiment, 'sentiment') },
  });
  stream.on('response.output_text.delta', (e) => onDelta(e.delta));
  return (await stream.finalResponse()).output_parsed;
}

// A needs_review is an OpenAI.APIError with status 422.
export function reviewOf(err) {
  if (err instanceof OpenAI.APIError && err.status === 422) {
    return { code: err.code, reviewId: err.error.review.id };
  }
  throw err;
}
