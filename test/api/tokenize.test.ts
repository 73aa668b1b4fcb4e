// vLLM's /tokenize, /detokenize and /version over real HTTP (mock runner), and /v1/embeddings
// answered with an OpenAI error: /tokenize counts exactly what a generation request bills as
// prompt tokens, /detokenize inverts it and refuses ids outside the vocabulary by index.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, test } from 'node:test';
import { request } from 'undici';
import type { TestServer } from '../helpers/headroom.ts';
import { startTestServer } from '../helpers/headroom.ts';

const model = 'headroom-mock';
let server: TestServer;
before(async () => {
  server = await startTestServer();
});
after(() => server.close());

async function post<T>(path: string, body: unknown): Promise<{ status: number; json: T }> {
  const res = await request(`${server.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: res.statusCode, json: (await res.body.json()) as T };
}

type Tokenized = { count: number; max_model_len: number; tokens: number[] };
type Usage = { usage: { prompt_tokens: number } };
type Err = { error: { code: string; param: string | null; message: string; type: string } };

test('/tokenize counts what /v1/chat/completions and /v1/completions bill as prompt tokens', async () => {
  const messages = [{ role: 'system', content: 'be brief' }, { role: 'user', content: 'héllo, wörld' }];
  const chat = await post<Tokenized>('/tokenize', { model, messages });
  assert.equal(chat.status, 200);
  const billed = await post<Usage>('/v1/chat/completions', { model, messages, max_tokens: 1 });
  assert.equal(chat.json.count, billed.json.usage.prompt_tokens);
  assert.equal(chat.json.tokens.length, chat.json.count);
  assert.equal(chat.json.max_model_len, server.runner.info.contextTokens);

  const text = await post<Tokenized>('/tokenize', { prompt: 'once upon a time' });
  const billedText = await post<Usage>('/v1/completions', { model, prompt: 'once upon a time', max_tokens: 1 });
  assert.equal(text.json.count, billedText.json.usage.prompt_tokens);
  const noBos = await post<Tokenized>('/tokenize', { prompt: 'once upon a time', add_special_tokens: false });
  assert.deepEqual(noBos.json.tokens, text.json.tokens.slice(1), 'add_special_tokens: false drops only the BOS');
});

test('/detokenize inverts /tokenize, and refuses an id outside the vocabulary by its index', async () => {
  const prompt = 'a river, 中文 and ü';
  const t = await post<Tokenized>('/tokenize', { prompt, add_special_tokens: false });
  const d = await post<{ prompt: string }>('/detokenize', { model, tokens: t.json.tokens });
  assert.equal(d.status, 200);
  assert.equal(d.json.prompt, prompt);
  const vocab = server.runner.tokenizer.vocabSize;
  for (const [bad, i] of [[vocab, 1], [-1, 0]] as const) {
    const tokens = [...t.json.tokens.slice(0, 2)];
    tokens[i] = bad;
    const r = await post<Err>('/detokenize', { tokens });
    assert.equal(r.status, 400);
    assert.deepEqual([r.json.error.code, r.json.error.param], ['invalid_value', `tokens.${i}`]);
  }
});

test('/tokenize and /detokenize refuse what they cannot do with OpenAI error JSON', async () => {
  const cases: [string, unknown, number, string, string | null][] = [
    ['/tokenize', { prompt: 'x', messages: [{ role: 'user', content: 'x' }] }, 400, 'invalid_value', 'messages'],
    ['/tokenize', {}, 400, 'invalid_value', 'prompt'],
    ['/tokenize', { model: 'other', prompt: 'x' }, 404, 'model_not_found', 'model'],
    ['/tokenize', { messages: [{ role: 'user', content: 'x' }], add_generation_prompt: false }, 400, 'unsupported_value', 'add_generation_prompt'],
    ['/detokenize', { tokens: [1.5] }, 400, 'invalid_value', 'tokens.0'],
    ['/detokenize', { tokens: 'abc' }, 400, 'invalid_value', 'tokens'],
  ];
  for (const [path, body, status, code, param] of cases) {
    const r = await post<Err>(path, body);
    assert.equal(r.status, status, `${path} ${JSON.stringify(body)}`);
    assert.deepEqual([r.json.error.code, r.json.error.param], [code, param], `${path} ${JSON.stringify(body)}`);
  }
});

test('/version is package.json\'s version', async () => {
  const res = await request(`${server.url}/version`);
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
  assert.deepEqual(await res.body.json(), { version: pkg.version });
});

test('/v1/embeddings is an OpenAI 404 model_not_found saying embeddings are not served', async () => {
  const r = await post<Err>('/v1/embeddings', { model, input: 'hello' });
  assert.equal(r.status, 404);
  assert.deepEqual([r.json.error.type, r.json.error.code, r.json.error.param], ['not_found_error', 'model_not_found', 'model']);
  assert.match(r.json.error.message, /does not serve embeddings/);
});
