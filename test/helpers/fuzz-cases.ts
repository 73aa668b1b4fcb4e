// Generators of malformed requests for test/api/fuzz.test.ts, seeded (fast-check): JSON bodies
// that are wrong in at least one way the API must refuse (so a 2xx is a bug), and raw byte
// sequences for what a client library would never send (bad framing, invalid UTF-8, header floods,
// pipelining, HTTP/1.0, abrupt disconnects, slow bodies).
import fc from 'fast-check';

export const MODEL = 'headroom-mock';

/** A JSON request: path, headers, body bytes. Every one must get a 4xx. */
export interface JsonCase {
  readonly path: string;
  readonly headers: Record<string, string>;
  readonly body: Buffer;
}

/** Raw bytes on a fresh socket; `expect` says what a correct server does. */
export interface RawCase {
  readonly name: string;
  readonly chunks: readonly Buffer[];
  /** Delay between chunks (slow bodies), ms. */
  readonly gapMs: number;
  /** 'respond': every response on the socket is 4xx and the server closes it; 'hangup': we close early (abrupt disconnect). */
  readonly expect: 'respond' | 'hangup';
}

const nasty = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 40 }), // lone surrogates included
  fc.constantFrom('\u0000', 'abc\u0000def', '\ud800', '\udfff', 'é中'.repeat(50), '<|im_start|>system\n', '\u202e'),
  fc.string({ minLength: 2000, maxLength: 6000 }),
);
const hugeOrNegative = fc.constantFrom(-1, -1e308, 1e308, 2 ** 53 + 1, -(2 ** 31), 2 ** 32, 1e12, -0.5, 0.5, Number.MIN_VALUE);
const anyJson = fc.oneof(fc.jsonValue({ maxDepth: 3 }), nasty, hugeOrNegative);

/** Values a field can never accept. */
const INVALID: Record<string, fc.Arbitrary<unknown>> = {
  model: fc.oneof(anyJson.filter((v) => v !== MODEL), fc.constant(null)),
  max_tokens: fc.oneof(fc.integer({ max: 0 }), fc.double({ noNaN: true, min: 0.01, max: 0.99 }), fc.string(), fc.constantFrom(1e12, 2 ** 53 + 1, true, [], {})),
  temperature: fc.oneof(fc.double({ min: 2.001, max: 1e308, noNaN: true }), fc.double({ max: -0.001, min: -1e308, noNaN: true }), fc.string(), fc.constant([])),
  top_p: fc.oneof(fc.constantFrom(0, -1, 1.5, 1e308), fc.string()),
  n: fc.oneof(fc.integer({ min: 9 }), fc.integer({ max: 0 }), fc.string()),
  stop: fc.oneof(fc.constant(''), fc.array(fc.string({ minLength: 1 }), { minLength: 5, maxLength: 8 }), fc.integer(), fc.constant([''])),
  stream: fc.oneof(fc.string(), fc.integer(), fc.constant([])),
  seed: fc.oneof(fc.string(), fc.double({ noInteger: true, noNaN: true }), fc.constant({})),
  stream_options: fc.oneof(fc.string(), fc.integer(), fc.constant({ include_usage: 'yes' })),
};
const invalidMessages = fc.oneof(
  fc.constant([]),
  anyJson.filter((v) => !Array.isArray(v)),
  fc.array(fc.record({ role: fc.string().filter((r) => !['system', 'developer', 'user', 'assistant', 'tool'].includes(r)), content: nasty }), { minLength: 1, maxLength: 3 }),
  fc.array(fc.record({ role: fc.constant('user'), content: fc.oneof(fc.integer(), fc.constant([]), fc.constant({ text: 'x' })) }), { minLength: 1, maxLength: 3 }),
  // Past the size bound: refused before tokenizing.
  fc.constant([{ role: 'user', content: 'é中'.repeat(6000) }]),
  fc.constant(Array.from({ length: 3000 }, () => ({ role: 'user', content: 'w' }))),
);
const invalidPrompt = fc.oneof(
  fc.constant(''),
  fc.constant([]),
  fc.array(fc.integer({ max: -1 }), { minLength: 1, maxLength: 5 }),
  fc.array(fc.integer({ min: 100_000 }), { minLength: 1, maxLength: 5 }),
  fc.record({ text: nasty }),
  fc.constant('é中'.repeat(6000)),
);
const extras = fc.dictionary(fc.string({ maxLength: 8 }).filter((k) => !['model', 'messages', 'prompt', 'max_tokens', 'max_completion_tokens', 'stop', 'temperature', 'top_p', 'seed', 'stream', 'stream_options', 'n', 'ignore_eos', 'user', 'echo', '__proto__'].includes(k)), anyJson, { maxKeys: 3 });
const badSlo = fc.constantFrom('0', '1', '99', '-5', 'soon', '1e3', '99999999999999999999', '3600001', '');

function nested(depth: number): string {
  return '['.repeat(depth) + ']'.repeat(depth);
}

const jsonCaseArb: fc.Arbitrary<JsonCase> = fc.oneof(
  // Any JSON at all as the body: never a valid request (the model must match).
  fc.record({ path: fc.constantFrom('/v1/chat/completions', '/v1/completions', '/v1/responses'), body: anyJson }).map(({ path, body }) => ({ path, headers: {}, body: Buffer.from(JSON.stringify(body) ?? 'null') })),
  // A valid body with one field made invalid, plus noise the API ignores.
  fc.record({ chat: fc.boolean(), field: fc.constantFrom(...Object.keys(INVALID), 'messages-or-prompt'), extra: extras, stream: fc.boolean() }).chain(({ chat, field, extra, stream }) => {
    const valueArb = field === 'messages-or-prompt' ? (chat ? invalidMessages : invalidPrompt) : INVALID[field]!;
    return valueArb.map((value) => {
      const base: Record<string, unknown> = chat ? { model: MODEL, messages: [{ role: 'user', content: 'hi' }] } : { model: MODEL, prompt: 'hi' };
      Object.assign(base, extra, { max_tokens: 2, stream });
      base[field === 'messages-or-prompt' ? (chat ? 'messages' : 'prompt') : field] = value;
      if (field === 'stream_options') base['stream'] = true;
      return { path: chat ? '/v1/chat/completions' : '/v1/completions', headers: {}, body: Buffer.from(JSON.stringify(base)) };
    });
  }),
  // A valid body with a budget header the server cannot accept.
  fc.record({ slo: badSlo, chat: fc.boolean() }).map(({ slo, chat }) => ({
    path: chat ? '/v1/chat/completions' : '/v1/completions',
    headers: { 'x-slo-ms': slo },
    body: Buffer.from(JSON.stringify(chat ? { model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 1 } : { model: MODEL, prompt: 'hi', max_tokens: 1 })),
  })),
  // Not JSON: truncated, deeply nested, wrong content, invalid UTF-8.
  fc.oneof(
    fc.string({ maxLength: 50 }).map((s) => Buffer.from(`{"model":"${MODEL}","prompt":${s}`)),
    fc.integer({ min: 1000, max: 100_000 }).map((d) => Buffer.from(`{"model":"${MODEL}","prompt":${nested(d)}}`)),
    fc.integer({ min: 1000, max: 100_000 }).map((d) => Buffer.from(`{"model":1,"prompt":"x","deep":${nested(d)}}`)),
    fc.uint8Array({ minLength: 1, maxLength: 64 }).map((b) => Buffer.concat([Buffer.from(`{"model":"${MODEL}","prompt":"`), Buffer.from([0xc3, 0x28]), Buffer.from(b), Buffer.from('"}')])),
    fc.constantFrom(Buffer.from(''), Buffer.from('   '), Buffer.from('\u0000'), Buffer.from('{"model":"headroom-mock","prompt":"\\ud800"}garbage')),
  ).map((body) => ({ path: '/v1/completions', headers: {}, body })),
);

export function jsonCases(n: number, seed: number): JsonCase[] {
  return fc.sample(jsonCaseArb, { numRuns: n, seed });
}

const b = (s: string): Buffer => Buffer.from(s, 'latin1');
const post = (path: string, body: Buffer, extra = '', version = '1.1'): Buffer =>
  Buffer.concat([b(`POST ${path} HTTP/${version}\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n${extra}\r\n`), body]);

const rawCaseArb: fc.Arbitrary<RawCase> = fc.oneof(
  fc.uint8Array({ minLength: 1, maxLength: 200 }).map((g) => ({ name: 'garbage bytes', chunks: [Buffer.from(g), b('\r\n\r\n')], gapMs: 0, expect: 'respond' as const })),
  fc.integer({ min: 170, max: 400 }).map((k) => ({ name: 'header flood', chunks: [b(`GET /health HTTP/1.1\r\nHost: x\r\n${Array.from({ length: k }, (_, i) => `X-H${i}: ${'v'.repeat(100)}\r\n`).join('')}\r\n`)], gapMs: 0, expect: 'respond' as const })),
  fc.integer({ min: 17_000, max: 40_000 }).map((n) => ({ name: 'one huge header', chunks: [b(`GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(n)}\r\n\r\n`)], gapMs: 0, expect: 'respond' as const })),
  fc.string({ unit: 'binary', maxLength: 20 }).map((s) => ({ name: 'bad chunked framing', chunks: [b(`POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\nzz${s}\r\n\r\n`)], gapMs: 0, expect: 'respond' as const })),
  fc.constant({ name: 'Content-Length and chunked', chunks: [b('POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n{}')], gapMs: 0, expect: 'respond' as const }),
  fc.integer({ min: 1, max: 3 }).map((k) => ({
    name: 'pipelined malformed requests',
    chunks: [Buffer.concat([...Array.from({ length: k }, () => post('/v1/completions', b('{"model":1}'))), post('/v1/chat/completions', b('[]'), 'Connection: close\r\n')])],
    gapMs: 0,
    expect: 'respond' as const,
  })),
  fc.constantFrom('/v1/completions', '/v1/chat/completions', '/nope').map((path) => ({ name: 'HTTP/1.0', chunks: [post(path, b('{"model":"x"}'), '', '1.0')], gapMs: 0, expect: 'respond' as const })),
  fc.uint8Array({ minLength: 1, maxLength: 32 }).map((g) => ({ name: 'invalid UTF-8 body', chunks: [post('/v1/completions', Buffer.concat([b(`{"model":"${MODEL}","prompt":"`), Buffer.from([0xff, 0xfe]), Buffer.from(g), b('"}')]), 'Connection: close\r\n')], gapMs: 0, expect: 'respond' as const })),
  fc.constantFrom('GET', 'PUT', 'DELETE', 'PATCH', 'OPTIONS').map((m) => ({ name: 'wrong method', chunks: [b(`${m} /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`)], gapMs: 0, expect: 'respond' as const })),
  fc.constantFrom('/v1/models%zz', '/%%%', '/v1/completions?x=%ff').map((p) => ({ name: 'bad URL', chunks: [b(`GET ${p} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`)], gapMs: 0, expect: 'respond' as const })),
  // Abrupt disconnects: mid-headers, mid-body, mid-stream of a valid request.
  fc.integer({ min: 1, max: 60 }).map((cut) => ({ name: 'disconnect mid-headers', chunks: [post('/v1/completions', b('{}')).subarray(0, cut)], gapMs: 0, expect: 'hangup' as const })),
  fc.constant({ name: 'disconnect mid-body', chunks: [b(`POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n{"model":`)], gapMs: 0, expect: 'hangup' as const }),
  fc.constant({ name: 'disconnect mid-stream', chunks: [post('/v1/completions', b(JSON.stringify({ model: MODEL, prompt: 'the river', max_tokens: 200, ignore_eos: true, stream: true })))], gapMs: 0, expect: 'hangup' as const }),
);

export function rawCases(n: number, seed: number): RawCase[] {
  return fc.sample(rawCaseArb, { numRuns: n, seed });
}

/** A body sent a few bytes at a time, slower than the request timeout allows. */
export function slowBodyCase(): RawCase {
  const body = b(JSON.stringify({ model: MODEL, prompt: 'slow' }));
  const chunks = [b(`POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`)];
  for (let i = 0; i < body.length; i += 2) chunks.push(body.subarray(i, i + 2));
  return { name: 'slow body', chunks, gapMs: 150, expect: 'respond' };
}
