// Two in-process gateways sharing flow control through a real redis-server, in front of stub
// upstreams that count how many requests are open at once: the shared request cap holds exactly at
// the upstreams under a burst split across both gateways; with Redis killed mid-run both keep
// serving from their local share (⌊10 / 2⌋ = 5 each, held exactly), and /stats and /metrics say
// so; with Redis back both return to shared mode and the global cap holds again.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { test } from 'node:test';
import { request } from 'undici';
import type { SharedFlowState } from '../../src/flow/flow-control.ts';
import type { FlowLimits } from '../../src/flow/flow-core.ts';
import { SharedFlowController } from '../../src/flow/shared-flow-controller.ts';
import { RedisStore } from '../../src/flow/shared-store.ts';
import { startTestGateway } from '../helpers/gateway.ts';
import type { TestGateway } from '../helpers/gateway.ts';
import { RedisServer, haveRedis } from '../helpers/redis-server.ts';
import { OpenCount, StubUpstream } from '../helpers/stub-upstream.ts';

const LIMITS: FlowLimits = { maxRequests: 10, maxInputTokens: Infinity, maxTotalTokens: Infinity, shares: [1], queueSize: 1000, queueTtlMs: 30_000 };
const LEASE_MS = 900;

function sharedFlow(url: string, prefix: string): SharedFlowController {
  return new SharedFlowController(LIMITS, new RedisStore({ url, leaseMs: LEASE_MS, timeoutMs: 200, keyPrefix: prefix }), { replicas: 2, leaseMs: LEASE_MS, pollMs: 2 });
}

/** `n` completions at once, alternating between the gateways; returns their status codes. */
async function burst(gws: readonly TestGateway[], n: number): Promise<number[]> {
  const body = JSON.stringify({ model: 'stub-model', prompt: 'hi', max_tokens: 4 });
  return Promise.all(
    Array.from({ length: n }, async (_, i) => {
      const r = await request(`${gws[i % gws.length]!.url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
      await r.body.dump();
      return r.statusCode;
    }),
  );
}

async function shared(gw: TestGateway): Promise<SharedFlowState> {
  const r = await request(`${gw.url}/stats`);
  const stats = (await r.body.json()) as { flow: { shared: SharedFlowState } };
  return stats.flow.shared;
}

async function metric(gw: TestGateway, series: string): Promise<number> {
  const text = await (await request(`${gw.url}/metrics`)).body.text();
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  if (line === undefined) throw new Error(`no ${series} on /metrics`);
  return Number(line.slice(series.length + 1));
}

async function until(what: string, ok: () => Promise<boolean>, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await ok())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

test('two gateways sharing one Redis never hold more than the cap of 10 at the upstream under a 200-request burst', { timeout: 60_000 }, async (t) => {
  if (!haveRedis(t)) return;
  const redis = await RedisServer.start();
  const prefix = `{t-${randomUUID()}}`;
  const stub = await new StubUpstream({ tokens: 4, tokenDelayMs: 2 }).start();
  const gws = [await startTestGateway([stub.url], { flow: sharedFlow(redis.url, prefix) }), await startTestGateway([stub.url], { flow: sharedFlow(redis.url, prefix) })];
  try {
    await until('both gateways in redis mode', async () => (await Promise.all(gws.map(shared))).every((s) => s.mode === 'redis'));
    const codes = await burst(gws, 200);
    assert.deepEqual(new Set(codes), new Set([200]), 'every request served (queue 1000, TTL 30 s)');
    assert.ok(stub.open.peak <= 10, `${stub.open.peak} requests open at the upstream at once, over the cap of 10`);
    assert.equal(stub.open.peak, 10, `the burst never reached the cap (peak ${stub.open.peak})`);
  } finally {
    await Promise.all(gws.map((g) => g.close()));
    await stub.stop();
    await redis.kill();
  }
});

test('Redis killed mid-run: both gateways serve from their local share (5 of 10 each) and say so; Redis back: shared again', { timeout: 120_000 }, async (t) => {
  if (!haveRedis(t)) return;
  const redis = await RedisServer.start();
  const prefix = `{t-${randomUUID()}}`;
  const global = new OpenCount();
  const stubs = [await new StubUpstream({ tokens: 4, tokenDelayMs: 2, alsoCount: [global] }).start(), await new StubUpstream({ tokens: 4, tokenDelayMs: 2, alsoCount: [global] }).start()];
  const gws = [await startTestGateway([stubs[0]!.url], { flow: sharedFlow(redis.url, prefix) }), await startTestGateway([stubs[1]!.url], { flow: sharedFlow(redis.url, prefix) })];
  const resetPeaks = (): void => [global, ...stubs.map((s) => s.open)].forEach((c) => c.resetPeak());
  try {
    await until('both gateways in redis mode', async () => (await Promise.all(gws.map(shared))).every((s) => s.mode === 'redis'));
    for (const gw of gws) assert.equal(await metric(gw, 'headroom_flow_shared_state{mode="redis"}'), 1);
    const before = await burst(gws, 100);
    assert.deepEqual(new Set(before), new Set([200]));
    assert.equal(global.peak, 10, `shared mode before the outage: peak ${global.peak} across both upstreams, expected the cap of 10 exactly`);

    await redis.kill();
    resetPeaks();
    const during = await burst(gws, 200);
    assert.deepEqual(new Set(during), new Set([200]), 'both keep serving while Redis is down');
    for (const [i, s] of stubs.entries()) {
      assert.ok(s.open.peak <= 5, `gateway ${i}: ${s.open.peak} open at once in fallback, over its local share of 5`);
      assert.equal(s.open.peak, 5, `gateway ${i}: the fallback burst never reached the local share (peak ${s.open.peak})`);
    }
    for (const gw of gws) {
      const s = await shared(gw);
      assert.equal(s.mode, 'local-fallback');
      assert.ok(s.lastError !== null && s.lastError.length > 0, 'the last error is reported');
      assert.equal(await metric(gw, 'headroom_flow_shared_state{mode="local"}'), 1);
      assert.equal(await metric(gw, 'headroom_flow_shared_state{mode="redis"}'), 0);
      assert.equal(await metric(gw, 'headroom_flow_shared_fallbacks_total'), 1);
    }

    await redis.restart();
    await until('both gateways back in redis mode', async () => (await Promise.all(gws.map(shared))).every((s) => s.mode === 'redis'));
    for (const gw of gws) assert.equal(await metric(gw, 'headroom_flow_shared_state{mode="redis"}'), 1);
    resetPeaks();
    const after = await burst(gws, 200);
    assert.deepEqual(new Set(after), new Set([200]));
    assert.ok(global.peak <= 10, `after Redis came back: ${global.peak} open at once across both upstreams, over the cap of 10`);
    assert.equal(global.peak, 10, `after Redis came back the burst never reached the cap (peak ${global.peak})`);
    assert.equal((await shared(gws[0]!)).replicasSeen, 2);
  } finally {
    await Promise.all(gws.map((g) => g.close()));
    await Promise.all(stubs.map((s) => s.stop()));
    await redis.kill();
  }
});
