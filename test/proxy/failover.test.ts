// Health, ejection and failover, over real HTTP against stub upstreams (helpers/stub-upstream.ts):
// a dead upstream is ejected by the probes and traffic goes elsewhere; a request whose upstream
// dies before its first byte is retried on another, invisibly; an upstream dying mid-stream ends
// the client's stream with an error event and [DONE]; an upstream's 4xx reaches the client
// unchanged; no upstream left is 503 with Retry-After. Which upstream the picker tries first is
// set through the KV use the stubs report (the one with free KV is tried first).
import assert from 'node:assert/strict';
import { afterEach, test } from 'node:test';
import { request } from 'undici';
import type { TestGateway } from '../helpers/gateway.ts';
import { startTestGateway, within } from '../helpers/gateway.ts';
import { streamCompletion } from '../helpers/sse.ts';
import type { StubUpstream } from '../helpers/stub-upstream.ts';
import { startStubs } from '../helpers/stub-upstream.ts';

let stubs: StubUpstream[] = [];
let gw: TestGateway | null = null;

afterEach(async () => {
  await gw?.close();
  gw = null;
  await Promise.all(stubs.map((s) => s.stop().catch(() => undefined)));
  stubs = [];
});

const chat = (extra: object = {}): object => ({ model: 'stub-model', messages: [{ role: 'user', content: 'hello' }], max_tokens: 4, ...extra });

async function post(url: string, body: unknown, path = '/v1/chat/completions'): Promise<{ status: number; headers: Record<string, unknown>; json: { error?: { code: string; type: string; message: string } } }> {
  const res = await request(`${url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: res.statusCode, headers: res.headers, json: (await res.body.json()) as { error?: { code: string; type: string; message: string } } };
}

/** Two stubs, the first preferred by the picker (free KV), a gateway in front after one probe round. */
async function preferFirst(maxAttempts = 3): Promise<[StubUpstream, StubUpstream, TestGateway]> {
  stubs = await startStubs(2);
  stubs[0]!.load.kv = 0;
  stubs[1]!.load.kv = 0.5;
  gw = await startTestGateway(stubs.map((s) => s.url), { maxAttempts });
  return [stubs[0]!, stubs[1]!, gw];
}

test('a dead upstream is ejected by the health checks and traffic goes to the others; none left is 503 with Retry-After', async () => {
  const [a, b, g] = await preferFirst();
  const pool = g.gateway.backend.pool;
  assert.deepEqual(pool.snapshot().map((u) => u.health), ['healthy', 'healthy']);
  const ejected = new Promise<string>((resolve) => pool.onHealthChange((u, _from, to) => to === 'ejected' && resolve(u.url)));
  await a.stop();
  await pool.checkNow();
  assert.equal(await within(ejected, 'the dead upstream to be ejected'), a.url);
  for (let i = 0; i < 3; i++) {
    const r = await streamCompletion(g.url, chat({ stream: true }), '/v1/chat/completions');
    assert.equal(r.status, 200);
    assert.ok(r.sawDone);
  }
  assert.equal(b.requests.length, 3, 'every request went to the live upstream');
  assert.equal(g.gateway.backend.numFailovers, 0, 'the probe ejected it: no request had to fail over');

  b.healthStatus = 503;
  await pool.checkNow();
  const r = await post(g.url, chat());
  assert.equal(r.status, 503);
  assert.equal(r.json.error?.code, 'engine_unavailable');
  assert.equal(r.json.error?.type, 'overloaded_error');
  assert.ok(Number(r.headers['retry-after']) >= 1, 'a refusal carries Retry-After');
  // Nothing can serve: not ready (a load balancer sends traffic elsewhere), yet healthy (the process is fine).
  const notReady = await fetch(`${g.url}/ready`);
  assert.equal(notReady.status, 503);
  assert.equal(((await notReady.json()) as { serving: boolean }).serving, false);
  assert.equal((await fetch(`${g.url}/health`)).status, 200);

  // A probe that answers again takes it back.
  b.healthStatus = 200;
  await pool.checkNow();
  assert.equal((await post(g.url, chat())).status, 200);
  assert.equal((await fetch(`${g.url}/ready`)).status, 200);
});

for (const how of ['reset', 'headers'] as const) {
  test(`a request whose upstream dies before its first byte (${how}) is retried on another, invisibly`, async () => {
    const [a, b, g] = await preferFirst();
    a.failNext = how;
    const r = await streamCompletion(g.url, chat({ stream: true }), '/v1/chat/completions');
    assert.equal(r.status, 200);
    assert.ok(r.sawDone);
    assert.equal(r.text, ' t0 t1 t2 t3');
    assert.equal(r.finishReason, 'length');
    assert.equal(a.requests.length, 1, 'the preferred upstream got the request first');
    assert.equal(b.requests.length, 1, 'then the other one served it');
    assert.equal(g.gateway.backend.numFailovers, 1);
    assert.equal(g.gateway.backend.pool.upstreams[0]!.health, 'ejected', 'the upstream that could not answer is out of the pool');
    assert.equal(g.gateway.backend.numInFlight, 0);
  });
}

test('non-streamed requests fail over too; with one attempt allowed the client gets 503', async () => {
  const [a, b, g] = await preferFirst();
  a.failNext = 'reset';
  const ok = await post(g.url, chat());
  assert.equal(ok.status, 200);
  assert.equal(b.requests.length, 1);
  await g.close();
  gw = await startTestGateway(stubs.map((s) => s.url), { maxAttempts: 1 });
  b.failNext = 'reset';
  a.load.kv = 0.9;
  b.load.kv = 0;
  await gw.gateway.backend.pool.scrapeNow();
  const refused = await post(gw.url, chat());
  assert.equal(refused.status, 503);
  assert.equal(refused.json.error?.code, 'engine_unavailable');
});

test('an upstream dying mid-stream ends the stream with an error event and [DONE], whole events only', async () => {
  const [a, , g] = await preferFirst();
  a.failNext = 'midstream';
  a.failAfterTokens = 2;
  const r = await streamCompletion(g.url, chat({ stream: true }), '/v1/chat/completions').catch((e: unknown) => assert.fail(`the stream did not parse: ${String(e)}`));
  assert.equal(r.status, 200);
  assert.equal(r.text, ' t0 t1', 'the events before the failure arrive');
  const last = r.chunks.at(-1) as unknown as { error?: { code: string } };
  assert.equal(last.error?.code, 'engine_failure');
  assert.ok(r.sawDone, 'the stream is closed with [DONE]');
  assert.equal(g.gateway.backend.numInFlight, 0);
});

test("an upstream's 4xx reaches the client unchanged; a 503 from one upstream goes to another", async () => {
  const [a, b, g] = await preferFirst();
  const upstreamError = { error: { message: "This model's maximum context length is 4096 tokens.", type: 'invalid_request_error', param: 'messages', code: 'context_length_exceeded' } };
  a.answerNext = [400, upstreamError];
  const r = await post(g.url, chat());
  assert.equal(r.status, 400);
  assert.deepEqual(r.json, upstreamError);
  assert.equal(b.requests.length, 0, 'a client error is not retried');

  a.answerNext = [503, { error: { message: 'busy', type: 'overloaded_error', code: 'busy' } }];
  const ok = await post(g.url, chat());
  assert.equal(ok.status, 200);
  assert.equal(b.requests.length, 1);
});

test('envelope errors are answered by the gateway in the OpenAI shape', async () => {
  const [a, , g] = await preferFirst();
  const cases: [unknown, number, string][] = [
    [{ model: 'nope', messages: [{ role: 'user', content: 'x' }] }, 404, 'model_not_found'],
    [{ messages: [{ role: 'user', content: 'x' }] }, 400, 'missing_field'],
    [{ model: 'stub-model', messages: [] }, 400, 'invalid_value'],
    [{ model: 'stub-model', messages: [{ role: 'user', content: 'x' }], stream: 'yes' }, 400, 'invalid_value'],
    [{ model: 'stub-model', messages: [{ role: 'user', content: 'x' }], max_tokens: -1 }, 400, 'invalid_value'],
    [[1, 2], 400, 'invalid_value'],
  ];
  for (const [body, status, code] of cases) {
    const r = await post(g.url, body);
    assert.equal(r.status, status, JSON.stringify(body));
    assert.equal(r.json.error?.code, code, JSON.stringify(body));
  }
  const tok = await post(g.url, { prompt: 'x' }, '/tokenize');
  assert.equal(tok.status, 404);
  assert.equal(a.requests.length, 0, 'nothing invalid reached an upstream');
});

test('before any upstream has answered, generation is 503 loading with Retry-After, saying so in gateway terms; /ready is 503', async () => {
  const g = await startTestGateway(['http://127.0.0.1:1']); // nothing listens on port 1
  try {
    const r = await post(g.url, chat());
    assert.equal(r.status, 503);
    assert.equal(r.json.error?.code, 'loading');
    assert.match(r.json.error?.message ?? '', /No upstream has answered/);
    assert.ok(Number(r.headers['retry-after']) >= 1);
    assert.equal((await fetch(`${g.url}/ready`)).status, 503);
  } finally {
    await g.close();
  }
});
