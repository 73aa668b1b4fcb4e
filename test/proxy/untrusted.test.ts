// The gateway treats its upstreams as untrusted: an answer that is not what an OpenAI server
// sends (HTML, a malformed or oversized event, a stall) is an upstream error. Before the first
// byte reaches the client the request fails over to another upstream; after it the client's
// stream ends with an error event and [DONE]. The upstream's errors are counted, and it leaves
// rotation (health `degraded`) past --eject-after of them (a stall: at once). Probe and /metrics
// bodies are read with a bound. Memory stays bounded through all of it: the gateway's resident
// memory grows by less than MAX_RSS_GROWTH_MB while a misbehaving upstream pours 10-50 MB at it.
//
// Timeouts are set small through the options, so the tests assert what happened (a failover, an
// error event), never how long it took.
import assert from 'node:assert/strict';
import { afterEach, test } from 'node:test';
import { request } from 'undici';
import type { TestGateway } from '../helpers/gateway.ts';
import { startTestGateway, within } from '../helpers/gateway.ts';
import { streamCompletion } from '../helpers/sse.ts';
import { StubUpstream } from '../helpers/stub-upstream.ts';
import type { Behaviour } from './rogue-upstream.ts';
import { RogueUpstream } from './rogue-upstream.ts';

const MAX_RSS_GROWTH_MB = 50;
/** Small on purpose: the tests wait for these, and assert only what they caused. */
const PROXY = { firstByteTimeoutMs: 400, idleTimeoutMs: 400, maxEventBytes: 64 << 10 };

let rogue: RogueUpstream | null = null;
let good: StubUpstream | null = null;
let gw: TestGateway | null = null;

afterEach(async () => {
  await gw?.close();
  gw = null;
  await rogue?.stop();
  rogue = null;
  await good?.stop();
  good = null;
});

const chat = (extra: object = {}): object => ({ model: 'stub-model', messages: [{ role: 'user', content: 'hello' }], max_tokens: 4, stream: true, ...extra });

/** A misbehaving upstream the picker tries first (free KV), a good one behind it. */
async function rogueFirst(b: Behaviour): Promise<[RogueUpstream, StubUpstream, TestGateway]> {
  rogue = await new RogueUpstream(b).start();
  good = await new StubUpstream().start();
  good.load.kv = 0.5;
  gw = await startTestGateway([rogue.url, good.url], { proxy: PROXY, pool: { ejectAfterFailures: 1 } });
  return [rogue, good, gw];
}

/** The most the process's resident memory rose above its level before `f`, in MB. */
async function rssGrowthMb(f: () => Promise<unknown>): Promise<number> {
  const before = process.memoryUsage().rss;
  let peak = before;
  const timer = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 5);
  try {
    await f();
  } finally {
    clearInterval(timer);
  }
  peak = Math.max(peak, process.memoryUsage().rss);
  return (peak - before) / (1 << 20);
}

for (const b of ['html', 'notjson', 'huge', 'stall'] as const) {
  test(`an upstream answering ${b} before the first byte: the request fails over, the upstream's error is counted and it leaves rotation`, async () => {
    const [r, s, g] = await rogueFirst(b);
    let res: Awaited<ReturnType<typeof streamCompletion>> | null = null;
    const growth = await rssGrowthMb(async () => (res = await within(streamCompletion(g.url, chat(), '/v1/chat/completions'), 'the stream')));
    assert.ok(res !== null);
    const got = res as Awaited<ReturnType<typeof streamCompletion>>;
    assert.equal(got.status, 200);
    assert.equal(got.text, ' t0 t1 t2 t3', 'the good upstream served it');
    assert.ok(got.sawDone);
    assert.equal(r.numRequests, 1, 'the misbehaving upstream was tried first');
    assert.equal(s.requests.length, 1);
    const [bad] = g.gateway.backend.pool.snapshot();
    assert.equal(bad!.numUpstreamErrors, 1);
    assert.equal(bad!.health, 'degraded', `out of rotation: ${bad!.failure}`);
    assert.equal(g.gateway.backend.numFailovers, 1);
    assert.equal(g.gateway.backend.numInFlight, 0);
    assert.ok(growth < MAX_RSS_GROWTH_MB, `RSS grew ${growth.toFixed(0)} MB`);

    // Out of rotation: the next request goes straight to the good one, and a probe does not take it
    // back at once (its probes were never the problem).
    await g.gateway.backend.pool.checkNow();
    assert.equal(g.gateway.backend.pool.upstreams[0]!.health, 'degraded');
    const again = await streamCompletion(g.url, chat(), '/v1/chat/completions');
    assert.equal(again.status, 200);
    assert.equal(r.numRequests, 1);
  });
}

test('non-streamed: an HTML 200 fails over too; with no other upstream the client gets an OpenAI error, not the HTML', async () => {
  const [, s, g] = await rogueFirst('html');
  const ok = await request(`${g.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(chat({ stream: false })) });
  assert.equal(ok.statusCode, 200);
  assert.match(String(ok.headers['content-type']), /^application\/json/);
  assert.equal(((await ok.body.json()) as { choices: { message: { content: string } }[] }).choices[0]!.message.content, ' t0 t1 t2 t3');
  assert.equal(s.requests.length, 1);

  await g.close();
  gw = await startTestGateway([rogue!.url], { proxy: PROXY, pool: { ejectAfterFailures: 1 } });
  const alone = await request(`${gw.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(chat({ stream: false })) });
  assert.equal(alone.statusCode, 503);
  const body = (await alone.body.json()) as { error: { code: string; message: string } };
  assert.equal(body.error.code, 'engine_unavailable');
  assert.match(body.error.message, /text\/html/, 'the message says what the upstream did');
});

test('an upstream misbehaving once, below --eject-after, stays in rotation with its error counted', async () => {
  rogue = await new RogueUpstream('notjson').start();
  good = await new StubUpstream().start();
  good.load.kv = 0.5;
  gw = await startTestGateway([rogue.url, good.url], { proxy: PROXY, pool: { ejectAfterFailures: 3 } });
  const r = await streamCompletion(gw.url, chat(), '/v1/chat/completions');
  assert.equal(r.text, ' t0 t1 t2 t3');
  const [bad] = gw.gateway.backend.pool.snapshot();
  assert.equal(bad!.numUpstreamErrors, 1);
  assert.equal(bad!.health, 'healthy');
});

for (const b of ['good-bad', 'good-huge', 'good-stall'] as const) {
  test(`an upstream going wrong after the first byte (${b}): the client's stream ends with an error event and [DONE]`, async () => {
    rogue = await new RogueUpstream(b).start();
    gw = await startTestGateway([rogue.url], { proxy: PROXY, pool: { ejectAfterFailures: 1 } });
    const g = gw;
    let res: Awaited<ReturnType<typeof streamCompletion>> | null = null;
    const growth = await rssGrowthMb(async () => (res = await within(streamCompletion(g.url, chat(), '/v1/chat/completions'), 'the stream to end')));
    const got = res as unknown as Awaited<ReturnType<typeof streamCompletion>>;
    assert.equal(got.status, 200);
    assert.equal(got.text, ' ok', 'the good event before the failure arrived; nothing of the bad one');
    const last = got.chunks.at(-1) as unknown as { error?: { code: string; message: string } };
    assert.equal(last.error?.code, 'engine_failure');
    assert.ok(got.sawDone, 'the stream is closed with [DONE]');
    const [u] = g.gateway.backend.pool.snapshot();
    assert.equal(u!.numUpstreamErrors, 1);
    assert.equal(u!.health, 'degraded');
    assert.equal(g.gateway.backend.numInFlight, 0);
    assert.ok(growth < MAX_RSS_GROWTH_MB, `RSS grew ${growth.toFixed(0)} MB`);
  });
}

test('a 50 MB /metrics is read to a bound and cut: memory stays bounded, the scrape counts as failed', async () => {
  rogue = await new RogueUpstream('html').start();
  gw = await startTestGateway([rogue.url], { pool: { maxMetricsBytes: 1 << 20 } });
  const pool = gw.gateway.backend.pool;
  assert.equal(pool.snapshot()[0]!.scrapeFailure, null);
  rogue.metricsBytes = 50 << 20;
  const growth = await rssGrowthMb(() => within(pool.scrapeNow(), 'the scrape'));
  const [u] = pool.snapshot();
  assert.match(String(u!.scrapeFailure), /over 1048576 bytes/);
  assert.equal(u!.health, 'healthy', 'a scrape is not a request: the upstream stays in rotation, its load unknown (stale)');
  assert.ok(growth < MAX_RSS_GROWTH_MB, `RSS grew ${growth.toFixed(0)} MB`);
});
