// The sampling fields on the mock runner (no model): what it honours deterministically (logit
// bias, log-probabilities from its fake halving distribution), what it refuses (response_format:
// no grammar sampler) and the OpenAI shapes of log-probabilities, whole and streamed.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startTestServer } from '../helpers/headroom.ts';
import type { TestServer } from '../helpers/headroom.ts';
import { streamCompletion } from '../helpers/sse.ts';
import { MockTokenizer } from '../../src/engine/runner/mock/mock-tokenizer.ts';

let server: TestServer;
const model = 'headroom-mock';
const tokenizer = new MockTokenizer();

before(async () => {
  server = await startTestServer({ mock: { cost: { speed: 0 }, eosProbability: 0.05 } });
});
after(async () => {
  await server.close();
});

interface Entry {
  token: string;
  logprob: number;
  bytes: number[];
  top_logprobs: { token: string; logprob: number }[];
}
interface Body {
  choices: { text: string; message: { content: string }; finish_reason: string; logprobs: { content: Entry[] } & { tokens: string[]; token_logprobs: number[]; top_logprobs: Record<string, number>[]; text_offset: number[] } }[];
  usage: { completion_tokens: number };
  error: { message: string; param: string | null; code: string };
}

async function post(path: string, body: object): Promise<{ status: number; json: Body }> {
  const res = await fetch(`${server.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model, ...body }) });
  return { status: res.status, json: (await res.json()) as Body };
}

const chatBody = { messages: [{ role: 'user', content: 'hello' }] };

test('chat logprobs: the fake distribution halves down the ranks, the EOG token has no entry, the stream carries the same', async () => {
  const body = { ...chatBody, max_tokens: 60, logprobs: true, top_logprobs: 4, seed: 1 };
  const r = await post('/v1/chat/completions', body);
  assert.equal(r.status, 200);
  const c = r.json.choices[0]!;
  const entries = c.logprobs.content;
  const numEog = c.finish_reason === 'stop' ? 1 : 0;
  assert.equal(entries.length, r.json.usage.completion_tokens - numEog);
  assert.equal(entries.map((e) => Buffer.from(e.bytes).toString('latin1')).join(''), Buffer.from(c.message.content).toString('latin1'), "the entries' bytes are the text's bytes");
  for (const e of entries) {
    assert.equal(e.logprob, -Math.LN2);
    assert.deepEqual(e.top_logprobs.map((t) => t.logprob), [1, 2, 3, 4].map((k) => -k * Math.LN2));
    assert.equal(e.top_logprobs[0]!.token, e.token);
    assert.equal(new Set(e.top_logprobs.map((t) => t.token)).size, 4);
  }
  // Partial UTF-8 (the mock's emoji arrives byte by byte) is named by \xNN escapes.
  const long = await post('/v1/chat/completions', { ...body, max_tokens: 200, ignore_eos: true });
  assert.ok(long.json.choices[0]!.logprobs.content.some((e) => /^(\\x[0-9a-f]{2})+$/.test(e.token) && e.bytes.length === 1), 'an emoji byte appeared');
  const again = await post('/v1/chat/completions', body);
  assert.deepEqual(again.json.choices[0]!.logprobs, c.logprobs, 'deterministic');
  const s = await streamCompletion(server.url, { model, ...body, stream: true }, '/v1/chat/completions');
  const streamed = s.chunks.flatMap((ch) => (ch.choices[0] as { logprobs?: { content: Entry[] } | null } | undefined)?.logprobs?.content ?? []);
  assert.deepEqual(streamed, entries);
});

test('completions logprobs: tokens, token_logprobs, top_logprobs and text_offset line up with the text', async () => {
  const r = await post('/v1/completions', { prompt: 'the river', max_tokens: 20, logprobs: 2, temperature: 0, stop: [] });
  const c = r.json.choices[0]!;
  const lp = c.logprobs;
  assert.equal(lp.tokens.length, lp.token_logprobs.length);
  assert.equal(lp.tokens.length, lp.top_logprobs.length);
  let at = 0;
  lp.tokens.forEach((t, i) => {
    assert.equal(lp.text_offset[i], at);
    at += t.length;
    assert.equal(Object.keys(lp.top_logprobs[i]!).length, 2);
  });
  // Streamed: the same entries, the offsets continuing across chunks.
  const s = await streamCompletion(server.url, { model, prompt: 'the river', max_tokens: 20, logprobs: 2, temperature: 0, stream: true });
  type Lp = { tokens: string[]; text_offset: number[] };
  const parts = s.chunks.map((ch) => (ch.choices[0] as { logprobs?: Lp | null } | undefined)?.logprobs).filter((x): x is Lp => x != null);
  assert.deepEqual(parts.flatMap((p) => p.tokens), lp.tokens);
  assert.deepEqual(parts.flatMap((p) => p.text_offset), lp.text_offset);
  // Not asked for: null.
  assert.equal((await post('/v1/completions', { prompt: 'x', max_tokens: 2 })).json.choices[0]!.logprobs, null);
});

test('logit_bias: +100 forces a token, -100 bans one; the other sampling fields are accepted', async () => {
  const forced = tokenizer.tokenize('river', false)[0]!;
  const r = await post('/v1/completions', { prompt: 'x', max_tokens: 5, logit_bias: { [forced]: 100 }, ignore_eos: true });
  assert.equal(r.json.choices[0]!.text, 'river'.repeat(5));
  const plain = await post('/v1/completions', { prompt: 'x', max_tokens: 12, temperature: 0, logprobs: 0, ignore_eos: true });
  const banned = tokenizer.tokenize(plain.json.choices[0]!.logprobs.tokens[0]!, false);
  assert.equal(banned.length, 1);
  const other = await post('/v1/completions', { prompt: 'x', max_tokens: 12, temperature: 0, logprobs: 0, ignore_eos: true, logit_bias: { [banned[0]!]: -100 } });
  assert.ok(!other.json.choices[0]!.logprobs.tokens.includes(plain.json.choices[0]!.logprobs.tokens[0]!));
  const ignored = await post('/v1/completions', { prompt: 'x', max_tokens: 4, top_k: 3, min_p: 0.2, presence_penalty: 1, frequency_penalty: 1, repetition_penalty: 1.2 });
  assert.equal(ignored.status, 200);
});

test('response_format is refused on the mock runner, naming the field', async () => {
  for (const format of [{ type: 'json_object' }, { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'boolean' } } }]) {
    const r = await post('/v1/chat/completions', { ...chatBody, response_format: format });
    assert.equal(r.status, 400);
    assert.equal(r.json.error.param, 'response_format');
    assert.equal(r.json.error.code, 'unsupported_value');
    assert.match(r.json.error.message, /mock runner/);
  }
  // type text is no constraint at all.
  assert.equal((await post('/v1/chat/completions', { ...chatBody, max_tokens: 2, response_format: { type: 'text' } })).status, 200);
});
