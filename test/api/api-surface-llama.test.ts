// The new endpoints on the real llama runner (the generated tiny model, one thread): /tokenize
// counts what a chat request is billed for, /detokenize inverts it, and /v1/responses streams and
// returns the same text for the same seed through the openai client.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import OpenAI from 'openai';
import { request } from 'undici';
import type { TestServer } from '../helpers/headroom.ts';
import { startTestServer } from '../helpers/headroom.ts';
import { openTinyRunner } from '../engine/runner/llama/fixture.ts';

let server: TestServer;
let client: OpenAI;
let model: string;
before(async () => {
  server = await startTestServer({ runner: await openTinyRunner({ threads: 1, maxSequences: 4, contextTokens: 1024 }) });
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0 });
  model = server.runner.info.modelId;
});
after(() => server.close());

async function post<T>(path: string, body: unknown): Promise<T> {
  const res = await request(`${server.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  assert.equal(res.statusCode, 200);
  return (await res.body.json()) as T;
}

test('/tokenize counts the chat prompt exactly; /detokenize inverts a prompt\'s tokens', async () => {
  const messages = [{ role: 'system', content: 'be brief' }, { role: 'user', content: 'naïve café 🙂' }];
  const t = await post<{ count: number; tokens: number[] }>('/tokenize', { model, messages });
  const chat = await client.chat.completions.create({ model, messages: messages as OpenAI.ChatCompletionMessageParam[], max_tokens: 1 });
  assert.equal(t.count, chat.usage?.prompt_tokens);
  const prompt = 'the river, naïve café 🙂';
  const p = await post<{ tokens: number[] }>('/tokenize', { prompt, add_special_tokens: false });
  const d = await post<{ prompt: string }>('/detokenize', { tokens: p.tokens });
  // An SPM vocabulary's space prefix comes back as a leading space (the text as it would stream).
  assert.ok(d.prompt === prompt || d.prompt === ` ${prompt}`, JSON.stringify(d.prompt));
});

test('/v1/responses: streamed and whole give the same text for the same seed', async () => {
  const params = { model, instructions: 'be brief', input: 'tell me about the river', max_output_tokens: 12, temperature: 0.8, seed: 11 };
  const whole = await client.responses.create(params as OpenAI.Responses.ResponseCreateParamsNonStreaming);
  const stream = client.responses.stream(params);
  let text = '';
  stream.on('response.output_text.delta', (e) => (text += e.delta));
  const final = await stream.finalResponse();
  assert.equal(text, whole.output_text);
  assert.equal(final.output_text, whole.output_text);
  assert.equal(whole.usage?.output_tokens, final.usage?.output_tokens);
});
