// A scripted, OpenAI-compatible fake upstream for the SDK end-to-end tests.
// It listens on 127.0.0.1 (a free port), writes its base URL to the file
// named by --addr-file, records every request, and answers by the model
// the route sends:
//
//   fake-good  a valid sentiment object
//   fake-bad   prose, never valid (every attempt fails: needs_review)
//   fake-slow  the valid object after 2 s
//
// POST /v1/responses (a passthrough route's Responses call) answers a
// response object, or three SSE events when the body asks to stream; with
// input "break" the stream breaks off inside its second event.
//
// GET /_e2e/requests returns the recorded requests (method, path, headers,
// body) so the tests can check which key the upstream saw.
import http from 'node:http';
import fs from 'node:fs';
import { GOOD_CONTENT, BAD_CONTENT } from './fixtures.mjs';

const requests = [];

function completion(model, content) {
  return {
    id: 'chatcmpl-fake',
    object: 'chat.completion',
    created: 1700000000,
    model: `${model}-2024-01-01`,
    system_fingerprint: 'fp_fake',
    choices: [{ index: 0, finish_reason: 'stop', logprobs: null, message: { role: 'assistant', content } }],
    usage: { prompt_tokens: 50, completion_tokens: 10, total_tokens: 60 },
  };
}

// A passthrough route's Responses call: contractd forwards it to
// /v1/responses untouched but for model; this answers a response object
// echoing the model it saw, or streams three events, one write each.
function passthroughResponse(res, raw) {
  const body = JSON.parse(raw);
  const response = {
    id: 'resp_fake', object: 'response', created_at: 1700000000, status: 'completed', model: body.model,
    output: [{ type: 'message', id: 'msg_fake', status: 'completed', role: 'assistant',
      content: [{ type: 'output_text', text: `echo: ${body.input}`, annotations: [] }] }],
    usage: { input_tokens: 3, output_tokens: 2, total_tokens: 5 },
  };
  if (!body.stream) {
    send(res, 200, response);
    return;
  }
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  const events = [
    { type: 'response.created', sequence_number: 0, response: { ...response, status: 'in_progress', output: [] } },
    { type: 'response.output_text.delta', sequence_number: 1, item_id: 'msg_fake', output_index: 0, content_index: 0, delta: `echo: ${body.input}` },
    { type: 'response.completed', sequence_number: 2, response },
  ];
  if (body.input === 'break') {
    const cut = `event: ${events[1].type}\ndata: ${JSON.stringify(events[1])}`.slice(0, 40);
    res.write(`event: ${events[0].type}\ndata: ${JSON.stringify(events[0])}\n\n`);
    setTimeout(() => res.end(cut), 10);
    return;
  }
  let i = 0;
  const next = () => {
    if (i === events.length) {
      res.end();
      return;
    }
    const e = events[i++];
    res.write(`event: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`);
    setTimeout(next, 10);
  };
  next();
}

function send(res, status, obj) {
  const body = JSON.stringify(obj);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const raw = Buffer.concat(chunks).toString('utf8');
    if (req.method === 'GET' && req.url === '/_e2e/requests') {
      send(res, 200, requests);
      return;
    }
    requests.push({ method: req.method, path: req.url, headers: req.headers, body: raw });
    if (req.method === 'POST' && req.url === '/v1/responses') {
      passthroughResponse(res, raw);
      return;
    }
    if (req.method !== 'POST' || req.url !== '/v1/chat/completions') {
      send(res, 404, { error: { message: 'not found', type: 'invalid_request_error', code: null, param: null } });
      return;
    }
    let body;
    try {
      body = JSON.parse(raw);
    } catch {
      send(res, 400, { error: { message: 'bad json', type: 'invalid_request_error', code: null, param: null } });
      return;
    }
    switch (body.model) {
      case 'fake-good':
        send(res, 200, completion(body.model, GOOD_CONTENT));
        return;
      case 'fake-bad':
        send(res, 200, completion(body.model, BAD_CONTENT));
        return;
      case 'fake-slow':
        setTimeout(() => send(res, 200, completion(body.model, GOOD_CONTENT)), 2000);
        return;
      default:
        send(res, 404, { error: { message: `unknown model ${body.model}`, type: 'invalid_request_error', code: 'model_not_found', param: null } });
    }
  });
});

const i = process.argv.indexOf('--addr-file');
const addrFile = i > 0 ? process.argv[i + 1] : '';
server.listen(0, '127.0.0.1', () => {
  const { port } = server.address();
  const url = `http://127.0.0.1:${port}`;
  if (addrFile) {
    fs.writeFileSync(`${addrFile}.tmp`, url);
    fs.renameSync(`${addrFile}.tmp`, addrFile); // appears whole
  }
  console.log(`fake upstream listening on ${url}`);
});
for (const sig of ['SIGTERM', 'SIGINT']) {
  process.on(sig, () => {
    server.closeAllConnections();
    server.close();
    process.exit(0);
  });
}
