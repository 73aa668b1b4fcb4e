// The sampling parameters over real HTTP on the real llama runner (the generated tiny model, one
// llama thread). Its weights are random, so text is noise; each test checks what a parameter
// must do whatever the weights: a +100 bias forces its token, top_k 1 is greedy, log-probabilities
// are ordered and consistent, penalties stop repeats, a grammar forces schema-valid JSON.
import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, test } from 'node:test';
import { Ajv } from 'ajv';
import fc from 'fast-check';
import { startTestServer, waitForIdle } from '../helpers/headroom.ts';
import type { TestServer } from '../helpers/headroom.ts';
import { streamCompletion } from '../helpers/sse.ts';
import { smallSchema } from '../helpers/schemas.ts';
import { openTinyRunner } from '../engine/runner/llama/fixture.ts';
import type { LlamaRunner } from '../../src/engine/runner/llama/llama-runner.ts';
import { jsonObjectGbnf, jsonSchemaToGbnf } from '../../src/engine/grammar/json-schema-gbnf.ts';

let server: TestServer;
let runner: LlamaRunner;
let model: string;
const ajv = new Ajv({ strict: false });

before(async () => {
  runner = await openTinyRunner({ threads: 1, contextTokens: 4096, maxSequences: 8 });
  server = await startTestServer({ runner, scheduler: { scheduler: 'continuous', kv: 'paged', prefixCache: true } });
  model = runner.info.modelId;
});
after(async () => {
  await server.close();
});

/** The parts of OpenAI's response shapes these tests read. */
interface ChatEntry {
  token: string;
  logprob: number;
  bytes: number[];
  top_logprobs: { token: string; logprob: number; bytes: number[] }[];
}
interface CompletionChoice {
  text: string;
  finish_reason: string;
  logprobs: { tokens: string[]; token_logprobs: number[]; top_logprobs: Record<string, number>[]; text_offset: number[] };
}
interface ChatChoice {
  message: { content: string };
  finish_reason: string;
  logprobs: { content: ChatEntry[] } | null;
}
interface Body {
  choices: (CompletionChoice & ChatChoice)[];
  error: { param: string | null; type: string };
}

async function post(path: string, body: object): Promise<{ status: number; json: Body }> {
  const res = await fetch(`${server.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model, ...body }) });
  return { status: res.status, json: (await res.json()) as Body };
}

async function complete(body: object): Promise<CompletionChoice> {
  const r = await post('/v1/completions', body);
  assert.equal(r.status, 200, JSON.stringify(r.json));
  return r.json.choices[0]!;
}

async function chat(body: object): Promise<{ choices: ChatChoice[] }> {
  const r = await post('/v1/chat/completions', { messages: [{ role: 'user', content: 'Give me JSON.' }], ...body });
  assert.equal(r.status, 200, JSON.stringify(r.json));
  return r.json;
}

const piece = (id: number): string => Buffer.from(runner.tokenizer.tokenBytes(id)).toString('utf8');
/** The id of the token named `name` in a logprobs entry (the first with that piece). */
function idOf(name: string): number {
  for (let id = 0; id < runner.info.vocabSize; id++) if (piece(id) === name) return id;
  throw new Error(`no token is named ${JSON.stringify(name)}`);
}

test('logit_bias +100 forces its token at temperature 1; -100 bans the greedy choice', async () => {
  const forced = runner.tokenizer.tokenize('river', false).at(-1)!;
  const c = await complete({ prompt: 'the queue', max_tokens: 6, temperature: 1, seed: 3, logit_bias: { [forced]: 100 } });
  assert.equal(c.text, piece(forced).repeat(6));
  const greedy = await complete({ prompt: 'the queue', max_tokens: 1, temperature: 0, logprobs: 0 });
  const banned = idOf(greedy.logprobs.tokens[0]!);
  const other = await complete({ prompt: 'the queue', max_tokens: 1, temperature: 0, logprobs: 0, logit_bias: { [banned]: -100 } });
  assert.notEqual(other.logprobs.tokens[0], greedy.logprobs.tokens[0]);
});

test('top_k 1 and min_p 1 at temperature 1 sample the greedy tokens', async () => {
  const prompt = 'a long story about the river';
  const greedy = (await complete({ prompt, max_tokens: 12, temperature: 0 })).text;
  const hot = (await complete({ prompt, max_tokens: 12, temperature: 1, seed: 11 })).text;
  assert.notEqual(hot, greedy, 'plain temperature 1 wanders off the greedy path (else this test proves nothing)');
  assert.equal((await complete({ prompt, max_tokens: 12, temperature: 1, seed: 11, top_k: 1 })).text, greedy);
  assert.equal((await complete({ prompt, max_tokens: 12, temperature: 1, seed: 11, min_p: 1 })).text, greedy);
  // -1 and 0 mean off: the same tokens as no top_k at all.
  assert.equal((await complete({ prompt, max_tokens: 12, temperature: 1, seed: 11, top_k: -1 })).text, hot);
});

test('completions logprobs: the greedy token is the most likely, alternatives in order, offsets add up', async () => {
  const c = await complete({ prompt: 'the server keeps', max_tokens: 8, temperature: 0, logprobs: 5 });
  const lp = c.logprobs;
  assert.equal(lp.tokens.length, 8);
  assert.equal(lp.tokens.join(''), c.text);
  let offset = 0;
  lp.tokens.forEach((tok, i) => {
    assert.equal(lp.text_offset[i], offset);
    offset += tok.length;
    const top = Object.entries(lp.top_logprobs[i]!);
    assert.ok(top.length >= 4 && top.length <= 5, `${top.length} alternatives`); // distinct ids may share a name
    const values = top.map(([, v]) => v);
    for (let j = 1; j < values.length; j++) assert.ok(values[j - 1]! >= values[j]!, 'alternatives are most likely first');
    assert.equal(top[0]![0], tok, 'greedy picks the most likely token');
    assert.ok(Math.abs(top[0]![1] - lp.token_logprobs[i]!) < 1e-6);
    assert.ok(values.reduce((s, v) => s + Math.exp(v), 0) <= 1 + 1e-6, 'probabilities sum to at most 1');
    assert.ok(lp.token_logprobs[i]! < 0);
  });
});

test('chat logprobs: streamed entries equal the whole response, bytes name the token', async () => {
  const body = { max_tokens: 10, temperature: 0, logprobs: true, top_logprobs: 3 };
  const whole = (await chat(body)).choices[0]!;
  const content = whole.logprobs!.content;
  assert.equal(content.length, 10);
  for (const e of content) {
    assert.equal(Buffer.from(e.bytes).toString('utf8'), e.token);
    const [a, b, c] = e.top_logprobs;
    assert.equal(e.top_logprobs.length, 3);
    assert.equal(a!.token, e.token);
    assert.ok(a!.logprob >= b!.logprob && b!.logprob >= c!.logprob);
  }
  const s = await streamCompletion(server.url, { model, messages: [{ role: 'user', content: 'Give me JSON.' }], stream: true, ...body }, '/v1/chat/completions');
  const streamed = s.chunks.flatMap((c) => (c.choices[0] as Partial<ChatChoice> | undefined)?.logprobs?.content ?? []);
  assert.deepEqual(streamed, content);
  assert.equal(s.text, whole.message.content);
  // Not asked for: null, as before.
  assert.equal((await chat({ max_tokens: 2 })).choices[0]!.logprobs, null);
});

test('presence and frequency penalties stop greedy repeats; repetition_penalty counts the prompt', async () => {
  const prompt = 'the the the the';
  const plain = await complete({ prompt, max_tokens: 16, temperature: 0, logprobs: 0 });
  const tokens = plain.logprobs.tokens;
  assert.ok(new Set(tokens).size < tokens.length, `greedy decoding of random weights repeats itself: ${JSON.stringify(tokens)}`);
  for (const penalty of [{ presence_penalty: 2 }, { frequency_penalty: 2 }]) {
    const t = (await complete({ prompt, max_tokens: 16, temperature: 0, logprobs: 0, ...penalty })).logprobs.tokens;
    assert.equal(new Set(t).size, t.length, `${JSON.stringify(penalty)}: ${JSON.stringify(t)}`);
  }
  // The greedy continuation of (prompt + its own greedy output) repeats a token already there; a
  // strong repetition penalty over the prompt picks something else.
  const ids = [...runner.tokenizer.tokenize(prompt, true), ...tokens.map(idOf)];
  const next = (await complete({ prompt: ids, max_tokens: 1, temperature: 0, logprobs: 0 })).logprobs.tokens[0]!;
  assert.ok(ids.some((id) => piece(id) === next), 'the unpenalised next token is in the prompt');
  const penalised = (await complete({ prompt: ids, max_tokens: 1, temperature: 0, logprobs: 0, repetition_penalty: 10 })).logprobs.tokens[0]!;
  assert.ok(!ids.some((id) => piece(id) === penalised), `${penalised} is in the prompt`);
});

test('a penalised or constrained request that hits the prefix cache still counts the cached prompt (its sampler history)', async () => {
  // Words that do not repeat, so the cached head holds tokens the recomputed tail does not.
  const prompt = 'alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee zulu one two three four five six seven eight nine ten eleven twelve';
  const head = runner.tokenizer.tokenize(prompt, true)[2]!;
  const hits = (): number => server.headroom.engine.stats().scheduler.kv.prefixCache?.hitTokens ?? 0;
  // A bias makes the model want `head`; this request also puts the prompt in the cache.
  const wanted = await complete({ prompt, max_tokens: 3, temperature: 0, logit_bias: { [head]: 5 } });
  assert.ok(wanted.text.startsWith(piece(head)), wanted.text);
  // The cache keeps a prompt the second time it is seen (--cache-retain seen).
  await complete({ prompt, max_tokens: 3, temperature: 0, logit_bias: { [head]: 5 } });
  const hitsBefore = hits();
  const penalised = await complete({ prompt, max_tokens: 3, temperature: 0, logit_bias: { [head]: 5 }, repetition_penalty: 10 });
  assert.ok(hits() > hitsBefore, 'the penalised request hit the cache');
  assert.ok(!penalised.text.startsWith(piece(head)), `the penalty saw ${piece(head)} in the cached prompt: ${penalised.text}`);
  // Output-only history (frequency penalty, grammar): a hit changes nothing either.
  for (const extra of [{ frequency_penalty: 1.5 }, { response_format: { type: 'json_schema', json_schema: { name: 'b', schema: { type: 'array', items: { type: 'boolean' }, maxItems: 3 } } } }]) {
    const first = await complete({ prompt: `${prompt} ${JSON.stringify(extra)}`, max_tokens: 20, temperature: 0, ...extra });
    const second = await complete({ prompt: `${prompt} ${JSON.stringify(extra)}`, max_tokens: 20, temperature: 0, ...extra });
    assert.equal(second.text, first.text, JSON.stringify(extra));
  }
});

const SCHEMAS: object[] = [
  { type: 'object', properties: { ok: { type: 'boolean' }, n: { type: 'integer', minimum: 1, maximum: 5 }, color: { enum: ['red', 'green'] }, s: { type: 'string', maxLength: 6 } }, required: ['ok', 'n', 'color', 's'], additionalProperties: false },
  { type: 'array', items: { anyOf: [{ type: 'null' }, { type: 'boolean' }] }, minItems: 2, maxItems: 4 },
  { $defs: { p: { type: 'object', properties: { x: { type: 'integer', minimum: -2, maximum: 2 } }, required: ['x'], additionalProperties: false } }, type: 'object', properties: { a: { $ref: '#/$defs/p' }, b: { $ref: '#/$defs/p' } }, required: ['a'], additionalProperties: false },
];

test('response_format json_schema: the output parses and validates, whole, streamed and with n = 2', async () => {
  for (const [i, schema] of SCHEMAS.entries()) {
    const format = { type: 'json_schema', json_schema: { name: `s${i}`, schema, strict: true } };
    const whole = await chat({ max_tokens: 200, temperature: 1, seed: i, n: 2, response_format: format });
    for (const choice of whole.choices) {
      assert.equal(choice.finish_reason, 'stop', 'the grammar ended generation with EOS');
      const value = JSON.parse(choice.message.content) as unknown;
      assert.ok(ajv.validate(schema, value), `${choice.message.content} fails: ${ajv.errorsText()}`);
    }
    const s = await streamCompletion(server.url, { model, prompt: 'json:', max_tokens: 200, temperature: 1, seed: 7 + i, stream: true, response_format: format });
    assert.ok(ajv.validate(schema, JSON.parse(s.text)), `${s.text} fails: ${ajv.errorsText()}`);
  }
});

test('response_format json_object: a JSON object, even against a logit bias for its closing brace', async () => {
  // Random weights rarely close a string of their own accord (json_object bounds no string), so a
  // bias makes '}' likely: without the grammar it would come first; with it, after '{'.
  const close = idOf('}');
  const plain = await complete({ prompt: 'x', max_tokens: 3, temperature: 0, logit_bias: { [close]: 30 } });
  assert.ok(plain.text.startsWith('}'), plain.text);
  for (let seed = 0; seed < 3; seed++) {
    const c = (await chat({ max_tokens: 40, temperature: 1, seed, logit_bias: { [close]: 30 }, response_format: { type: 'json_object' } })).choices[0]!;
    assert.equal(c.finish_reason, 'stop');
    const v = JSON.parse(c.message.content) as unknown;
    assert.ok(typeof v === 'object' && v !== null && !Array.isArray(v), c.message.content);
  }
});

test("llama.cpp's grammar parser accepts the grammar of every random small schema", () => {
  assert.ok(runner.tokenizer.checkGrammar(jsonObjectGbnf()));
  assert.ok(!runner.tokenizer.checkGrammar('root ::= undefined-rule'), 'and refuses a broken one (else this proves nothing)');
  fc.assert(
    fc.property(smallSchema(), (schema) => runner.tokenizer.checkGrammar(jsonSchemaToGbnf(schema))),
    { numRuns: 200, seed: 9 },
  );
});

test('bad sampling values are a 400 naming the field, before the engine', async () => {
  const stepsBefore = server.headroom.engine.stats().numSteps;
  const cases: [string, object, string][] = [
    ['/v1/completions', { top_k: -2 }, 'top_k'],
    ['/v1/completions', { top_k: 1.5 }, 'top_k'],
    ['/v1/completions', { min_p: 1.5 }, 'min_p'],
    ['/v1/completions', { presence_penalty: 2.5 }, 'presence_penalty'],
    ['/v1/completions', { frequency_penalty: -3 }, 'frequency_penalty'],
    ['/v1/completions', { repetition_penalty: 0 }, 'repetition_penalty'],
    ['/v1/completions', { logit_bias: { 5: 101 } }, 'logit_bias.5'],
    ['/v1/completions', { logit_bias: { abc: 1 } }, 'logit_bias.abc'],
    ['/v1/completions', { logit_bias: { 999999: 1 } }, 'logit_bias'],
    ['/v1/completions', { logprobs: 6 }, 'logprobs'],
    ['/v1/completions', { logprobs: true }, 'logprobs'],
    ['/v1/chat/completions', { logprobs: true, top_logprobs: 21 }, 'top_logprobs'],
    ['/v1/chat/completions', { top_logprobs: 2 }, 'top_logprobs'],
    ['/v1/chat/completions', { response_format: { type: 'xml' } }, 'response_format.type'],
    ['/v1/chat/completions', { response_format: { type: 'json_schema' } }, 'response_format.json_schema'],
    ['/v1/chat/completions', { response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'string', pattern: '^a' } } } }, 'response_format.json_schema.schema.pattern'],
    ['/v1/chat/completions', { response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { $defs: { a: { $ref: '#/$defs/a' } }, $ref: '#/$defs/a' } } } }, 'response_format.json_schema.schema'],
    ['/v1/chat/completions', { ignore_eos: true, response_format: { type: 'json_object' } }, 'ignore_eos'],
    ['/v1/chat/completions', { response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { enum: Array.from({ length: 9000 }, (_, i) => `value ${i}`) } } } }, 'response_format.json_schema.schema'],
  ];
  for (const [path, extra, param] of cases) {
    const body = path === '/v1/completions' ? { prompt: 'x', max_tokens: 2, ...extra } : { messages: [{ role: 'user', content: 'x' }], max_tokens: 2, ...extra };
    const r = await post(path, body);
    assert.equal(r.status, 400, `${JSON.stringify(extra)} → ${r.status} ${JSON.stringify(r.json)}`);
    assert.equal(r.json.error.param, param, `${JSON.stringify(extra)}: ${JSON.stringify(r.json.error)}`);
    assert.equal(r.json.error.type, 'invalid_request_error');
  }
  assert.equal(server.headroom.engine.stats().numSteps, stepsBefore, 'no refused request reached the engine');
});

/** Open a stream, read `frames` SSE frames, then destroy the socket. */
function hangUpAfter(url: string, path: string, body: object, frames: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' } }, (res) => {
      let seen = 0;
      res.on('data', (buf: Buffer) => {
        seen += buf.toString().split('\n\n').filter((f) => f.startsWith('data: ')).length;
        if (seen >= frames) {
          req.destroy();
          resolve();
        }
      });
      res.on('end', () => reject(new Error(`the stream ended after ${seen} frames before we hung up`)));
    });
    req.on('error', () => undefined);
    req.end(JSON.stringify({ ...body, stream: true }));
  });
}

test('aborted grammar, penalty and logprobs streams leave no KV block or sequence id behind', async () => {
  const own = await openTinyRunner({ threads: 1, contextTokens: 2048, maxSequences: 4 });
  const s = await startTestServer({ runner: own, scheduler: { scheduler: 'continuous', kv: 'paged', prefixCache: false } });
  try {
    const before = s.headroom.engine.stats().scheduler;
    const m = own.info.modelId;
    const longString = { type: 'json_schema', json_schema: { name: 'long', schema: { type: 'array', items: { type: 'string', maxLength: 50 }, minItems: 40, maxItems: 40 } } };
    await Promise.all([
      hangUpAfter(s.url, '/v1/chat/completions', { model: m, messages: [{ role: 'user', content: 'x' }], max_tokens: 1000, response_format: longString }, 5),
      hangUpAfter(s.url, '/v1/completions', { model: m, prompt: 'the river', max_tokens: 1000, ignore_eos: true, repetition_penalty: 1.3, frequency_penalty: 0.5 }, 8),
      hangUpAfter(s.url, '/v1/completions', { model: m, prompt: 'the stone', max_tokens: 1000, ignore_eos: true, logprobs: 5, n: 2 }, 6),
    ]);
    await waitForIdle(s.headroom, 20_000);
    const after = s.headroom.engine.stats().scheduler;
    assert.equal(after.numRunning, 0);
    assert.equal(after.numWaiting, 0);
    assert.equal(after.numFreeSeqIds, before.numFreeSeqIds);
    assert.equal(after.kv.numFreeBlocks, before.kv.numFreeBlocks);
    s.headroom.engine.scheduler.checkInvariants();
    // The engine serves a grammar request normally afterwards.
    const r = await fetch(`${s.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: m, messages: [{ role: 'user', content: 'x' }], max_tokens: 50, response_format: { type: 'json_schema', json_schema: { name: 'b', schema: { type: 'boolean' } } } }) });
    const j = (await r.json()) as Body;
    assert.ok(typeof JSON.parse(j.choices[0]!.message.content) === 'boolean');
  } finally {
    await s.close();
  }
});
