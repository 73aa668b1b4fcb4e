// The request log: one line per request through fastify's logger, written when the response is
// over (a stream when it ends), with tenant, route, status, tokens, TTFT, E2E, outcome, error code
// and refusal reason — and no prompt or output text unless --log-prompts.
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { test } from 'node:test';
import { request } from 'undici';
import type { AdmissionController } from '../../src/admission/controller.ts';
import { refusal } from '../../src/backend/refusal.ts';
import { ActiveRequests } from '../../src/api/active-requests.ts';
import { serverConfig } from '../../src/api/config.ts';
import { ConnectionGuard } from '../../src/api/connections.ts';
import { textStream } from '../../src/api/logger.ts';
import { buildServer } from '../../src/api/server.ts';
import type { Backend } from '../../src/backend/backend.ts';
import { FlakyRunner } from '../helpers/flaky-runner.ts';
import { startOpsServer, until } from './ops-server.ts';

const SECRET = 'PURPLE-ELEPHANT-4471';

/** Admission on, refusing exactly the requests that ask for 7 tokens. */
const refuseSevens: AdmissionController = {
  name: 'refuse-sevens',
  needsFeatures: false,
  decide: (ctx) => (ctx.maxTokens === 7 ? { admit: false, boundMs: 5000, reason: 'over_budget', memo: null, refusal: refusal('conformal') } : { admit: true, boundMs: 1, reason: 'fits', memo: null }),
  observe: () => undefined,
  state: () => ({ name: 'refuse-sevens' }),
};

const chat = (url: string, body: Record<string, unknown>, headers: Record<string, string> = {}) =>
  request(`${url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify({ model: 'headroom-mock', messages: [{ role: 'user', content: SECRET }], ...body }) });

test('one line per request, none with the prompt text: ok (JSON and stream), 400, 404, 503 refusal, client abort', async () => {
  const s = await startOpsServer({ admission: refuseSevens, mock: { cost: { speed: 1, decodeSeqMs: 5 } } });
  try {
    const ok = await chat(s.url, { max_tokens: 5, ignore_eos: true });
    const okBody = (await ok.body.json()) as { usage: { prompt_tokens: number; completion_tokens: number } };
    const streamed = await chat(s.url, { max_tokens: 6, ignore_eos: true, stream: true });
    await streamed.body.text();
    const bad = await chat(s.url, { max_tokens: -1 });
    await bad.body.dump();
    const missing = await request(`${s.url}/v1/nothing`);
    await missing.body.dump();
    const refused = await chat(s.url, { max_tokens: 7 });
    await refused.body.dump();
    assert.deepEqual([ok.statusCode, streamed.statusCode, bad.statusCode, missing.statusCode, refused.statusCode], [200, 200, 400, 404, 503]);

    // A client that leaves mid-stream.
    const leaving = await chat(s.url, { max_tokens: 400, ignore_eos: true, stream: true });
    for await (const _ of leaving.body) break; // first bytes, then go
    leaving.body.destroy();

    await until(() => s.requests().length === 6, 'six request lines');
    const lines = s.requests();
    for (const l of s.raw) assert.ok(!l.includes(SECRET), `no prompt text in ${l}`);
    const byId = new Map(lines.map((l) => [l.request_id, l]));
    assert.equal(byId.size, 6, 'one line per request id');

    const okLine = byId.get(ok.headers['x-request-id'])!;
    assert.equal(okLine.level, 'info');
    assert.equal(okLine.outcome, 'ok');
    assert.equal(okLine.tenant, 'default');
    assert.equal(okLine.route, '/v1/chat/completions');
    assert.equal(okLine.status, 200);
    assert.equal(okLine.prompt_tokens, okBody.usage.prompt_tokens);
    assert.equal(okLine.completion_tokens, okBody.usage.completion_tokens);
    assert.ok(typeof okLine.ttft_ms === 'number' && typeof okLine.e2e_ms === 'number' && okLine.ttft_ms <= okLine.e2e_ms);

    const streamLine = byId.get(streamed.headers['x-request-id'])!;
    assert.equal(streamLine.outcome, 'ok');
    assert.equal(streamLine.completion_tokens, 6);

    const badLine = byId.get(bad.headers['x-request-id'])!;
    assert.deepEqual([badLine.level, badLine.outcome, badLine.status, badLine.code], ['warn', 'error', 400, 'invalid_value']);

    const missingLine = byId.get(missing.headers['x-request-id'])!;
    assert.deepEqual([missingLine.route, missingLine.path, missingLine.status, missingLine.code], [null, '/v1/nothing', 404, 'route_not_found']);

    const refusedLine = byId.get(refused.headers['x-request-id'])!;
    assert.deepEqual([refusedLine.level, refusedLine.outcome, refusedLine.status, refusedLine.code, refusedLine.refusal], ['warn', 'refused', 503, 'slo_unattainable', 'conformal']);

    const abortLine = byId.get(leaving.headers['x-request-id'])!;
    assert.equal(abortLine.outcome, 'aborted');
    assert.equal(abortLine.level, 'info');
    assert.ok((abortLine.completion_tokens as number) < 400, 'it stopped early');
    for (const l of lines) assert.ok(!('prompt' in l) && !('output' in l), 'no prompt or output fields');
  } finally {
    await s.close();
  }
});

test('a stream is logged when it ends, not when its headers go out', async () => {
  const s = await startOpsServer({ mock: { cost: { speed: 1, decodeSeqMs: 10 } } });
  try {
    const r = await chat(s.url, { max_tokens: 30, ignore_eos: true, stream: true });
    assert.equal(r.statusCode, 200);
    assert.equal(s.requests().length, 0, 'headers are out, the stream is not over: no line yet');
    await r.body.text();
    await until(() => s.requests().length === 1, 'the line');
    assert.equal(s.requests()[0]!.completion_tokens, 30);
  } finally {
    await s.close();
  }
});

test('--log-prompts puts prompt and output text in the line', async () => {
  const s = await startOpsServer({ server: { logPrompts: true } });
  try {
    const r = await chat(s.url, { max_tokens: 4, ignore_eos: true });
    const body = (await r.body.json()) as { choices: { message: { content: string } }[] };
    await until(() => s.requests().length === 1, 'the line');
    const line = s.requests()[0]!;
    assert.match(String(line.prompt), new RegExp(SECRET));
    assert.deepEqual(line.output, [body.choices[0]!.message.content]);
  } finally {
    await s.close();
  }
});

test('--log-level warn keeps refusals and errors, drops ok lines; probes log at debug', async () => {
  const s = await startOpsServer({ server: { logLevel: 'warn' }, admission: refuseSevens });
  try {
    await (await chat(s.url, { max_tokens: 3 })).body.dump();
    await (await chat(s.url, { max_tokens: 7 })).body.dump();
    await (await request(`${s.url}/health`)).body.dump();
    await until(() => s.requests().length === 1, 'the refusal line');
    await new Promise((r) => setTimeout(r, 50));
    assert.deepEqual(s.requests().map((l) => l.outcome), ['refused']);
  } finally {
    await s.close();
  }
  const d = await startOpsServer({ server: { logLevel: 'debug' } });
  try {
    await (await request(`${d.url}/health`)).body.dump();
    await until(() => d.requests().length === 1, 'the probe line');
    assert.equal(d.requests()[0]!.level, 'debug');
  } finally {
    await d.close();
  }
});

test('the text format renders the same facts on one line', () => {
  const out: string[] = [];
  const t = textStream({ write: (l) => void out.push(l) });
  t.write(JSON.stringify({ level: 'warn', time: '2026-01-01T00:00:00.000Z', pid: 1, request_id: 'abc', msg: 'request', route: '/v1/completions', status: 503, code: 'slo_unattainable', note: 'two words' }) + '\n');
  assert.deepEqual(out, ['2026-01-01T00:00:00.000Z WARN  request request_id=abc route=/v1/completions status=503 code=slo_unattainable note="two words"\n']);
});

test('a bug in a handler: the client gets internal_error, the log gets the stack at error level', async () => {
  const lines: string[] = [];
  const broken = { info: { mode: 'engine', modelId: 'x', contextTokens: 1 }, stats: () => { throw new Error('boom in stats'); } } as unknown as Backend;
  const app = buildServer({ backend: () => broken, config: serverConfig({ host: '127.0.0.1', port: 0 }), lifecycle: { warm: true }, active: new ActiveRequests(), connections: new ConnectionGuard({ maxConnections: 8, maxConnectionsPerAddress: 8 }), logDestination: { write: (l) => void lines.push(l) } });
  const url = await app.listen({ host: '127.0.0.1', port: 0 });
  try {
    const r = await request(`${url}/stats`);
    const e = (await r.body.json()) as { error: { code: string; message: string } };
    assert.equal(r.statusCode, 500);
    assert.equal(e.error.code, 'internal_error');
    assert.ok(!e.error.message.includes('boom'), 'the client sees no internals');
    await until(() => lines.some((l) => l.includes('"msg":"request"')), 'the request line');
    const parsed = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    const bug = parsed.find((l) => l.msg === 'unhandled error in a handler')!;
    assert.equal(bug.level, 'error');
    assert.match(String((bug.err as { stack: string }).stack), /boom in stats/);
    const line = parsed.find((l) => l.msg === 'request')!;
    assert.deepEqual([line.level, line.outcome, line.code, line.request_id], ['error', 'error', 'internal_error', bug.request_id]);
  } finally {
    await app.close();
  }
});

test('an error below the routes (bad HTTP framing) logs one warn line with the code it answered', async () => {
  const s = await startOpsServer();
  try {
    const { port } = new URL(s.url);
    const answer = await new Promise<string>((resolve, reject) => {
      const sock = connect(Number(port), '127.0.0.1', () => sock.write('GARBAGE / HTTP/9.9\r\n\r\n'));
      let got = '';
      sock.on('data', (b: Buffer) => (got += b.toString()));
      sock.on('close', () => resolve(got));
      sock.on('error', reject);
    });
    assert.match(answer, /^HTTP\/1.1 400/);
    await until(() => s.lines().some((l) => l.msg === 'client error'), 'the client error line');
    const line = s.lines().find((l) => l.msg === 'client error')!;
    assert.deepEqual([line.level, line.status, line.outcome, line.code], ['warn', 400, 'error', 'bad_request']);
  } finally {
    await s.close();
  }
});

test('an engine failure inside a 200 stream logs at error with engine_failure', async () => {
  const runner = new FlakyRunner({ cost: { speed: 0 } });
  const s = await startOpsServer({ runner });
  try {
    runner.failNext = 'fail';
    const r = await chat(s.url, { max_tokens: 5, stream: true });
    assert.match(await r.body.text(), /engine_failure/);
    await until(() => s.requests().length === 1, 'the line');
    const line = s.requests()[0]!;
    assert.deepEqual([line.level, line.status, line.outcome, line.code], ['error', 200, 'error', 'engine_failure']);
  } finally {
    await s.close();
  }
});

test('a stream the drain deadline cuts logs outcome timeout', async () => {
  const s = await startOpsServer({ mock: { cost: { speed: 1, decodeSeqMs: 10 } } });
  const r = await chat(s.url, { max_tokens: 1000, ignore_eos: true, stream: true });
  const text = r.body.text();
  await until(() => s.headroom.engine.numUnfinished === 1, 'the stream running');
  assert.equal(await s.headroom.drain(100), 'deadline');
  assert.match(await text, /engine_failure/);
  await until(() => s.requests().length === 1, 'the line');
  const line = s.requests()[0]!;
  assert.deepEqual([line.outcome, line.code, line.level], ['timeout', 'engine_failure', 'warn']);
  assert.ok((line.completion_tokens as number) < 1000);
});
