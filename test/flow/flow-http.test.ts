// Flow control over real HTTP (mock runner): a concurrent burst never holds more than the cap; a
// waiter past its TTL gets 429 rate_limited with Retry-After and leaves the queue; a client that
// disconnects while waiting leaves the queue at once and never takes a slot; two tenants with
// unequal load take turns; a low band is refused where the top band is served; and the slot comes
// back exactly once however the request ends (finish, 400 after the slot was taken, client abort
// mid-stream, admission refusal, engine error): in-flight counts return to zero each time.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { request } from 'undici';
import { refusal } from '../../src/backend/refusal.ts';
import { FlakyRunner } from '../helpers/flaky-runner.ts';
import type { FlowRequest, FlowResult } from '../../src/flow/flow-control.ts';
import type { FlowLimits } from '../../src/flow/flow-core.ts';
import { FlowController } from '../../src/flow/flow-controller.ts';
import type { OpsServerOptions } from '../api/ops-server.ts';
import { startOpsServer, until } from '../api/ops-server.ts';

const KEYS = ['sk-alpha-000000001 team-a', 'sk-beta-0000000002 team-b'];
const AUTH = { a: { authorization: 'Bearer sk-alpha-000000001' }, b: { authorization: 'Bearer sk-beta-0000000002' } };

/** A FlowController that records the most tickets held at once and every start, by tenant. */
class WatchedFlow extends FlowController {
  held = 0;
  peak = 0;
  starts: string[] = [];

  override acquire(req: FlowRequest, signal: AbortSignal): FlowResult | Promise<FlowResult> {
    const got = super.acquire(req, signal);
    return got instanceof Promise ? got.then((r) => this.#watch(r, req)) : this.#watch(got, req);
  }

  #watch(r: FlowResult, req: FlowRequest): FlowResult {
    if (!r.ok) return r;
    this.held++;
    this.peak = Math.max(this.peak, this.held);
    this.starts.push(req.caller.tenant);
    const inner = r.ticket;
    let once = true;
    return {
      ok: true,
      ticket: {
        release: () => {
          if (once) this.held--;
          once = false;
          inner.release();
        },
      },
    };
  }
}

const limits = (l: Partial<FlowLimits>): FlowLimits => ({ maxRequests: Infinity, maxInputTokens: Infinity, maxTotalTokens: Infinity, shares: [1], queueSize: 64, queueTtlMs: 10_000, ...l });

async function serve(flow: FlowController, opts: Omit<OpsServerOptions, 'flow'> = {}) {
  return startOpsServer({ server: { logLevel: 'silent' }, mock: { cost: { speed: 1 } }, ...opts, flow });
}

function post(url: string, body: Record<string, unknown>, headers: Record<string, string> = {}, signal?: AbortSignal) {
  const payload = JSON.stringify({ model: 'headroom-mock', prompt: 'the queue and the server', max_tokens: 8, ...body });
  return request(`${url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: payload, ...(signal === undefined ? {} : { signal }) });
}

const zero = { requests: 0, inputTokens: 0, totalTokens: 0 };

/** A request that holds its slot until stopped (1,000 tokens: seconds on the mock), so a loaded machine cannot end it early. */
function hold(url: string, headers: Record<string, string> = {}): { stop(): Promise<void> } {
  const ac = new AbortController();
  const r = post(url, { max_tokens: 1000, ignore_eos: true }, headers, ac.signal).then((res) => res.body.text()).catch(() => '');
  return {
    stop: async () => {
      ac.abort();
      await r;
    },
  };
}

test('a burst of 24 concurrent requests against a cap of 3: all served, never more than 3 hold a slot, and exactly 3 at the peak', async () => {
  const flow = new WatchedFlow(limits({ maxRequests: 3 }));
  const s = await serve(flow);
  try {
    const rs = await Promise.all(Array.from({ length: 24 }, () => post(s.url, { max_tokens: 12, ignore_eos: true }).then(async (r) => (await r.body.json(), r.statusCode))));
    assert.deepEqual(new Set(rs), new Set([200]));
    assert.equal(flow.peak, 3);
    assert.deepEqual(flow.state().inFlight, zero);
  } finally {
    await s.close();
  }
});

test('a burst against an input-token cap: tokens in flight never pass it (acquired after tokenizing), all served', async () => {
  const flow = new WatchedFlow(limits({ maxInputTokens: 40 }));
  let peakTokens = 0;
  flow.onDecision(() => (peakTokens = Math.max(peakTokens, flow.state().inFlight.inputTokens)));
  const s = await serve(flow);
  try {
    assert.ok(flow.needsTokens);
    const rs = await Promise.all(Array.from({ length: 12 }, () => post(s.url, { max_tokens: 6 }).then(async (r) => (await r.body.json(), r.statusCode))));
    assert.deepEqual(new Set(rs), new Set([200]));
    assert.ok(peakTokens > 0 && peakTokens <= 40, `peak input tokens ${peakTokens}`);
    assert.ok(flow.peak >= 2 && flow.peak < 12, `peak ${flow.peak}`);
    assert.deepEqual(flow.state().inFlight, zero);
  } finally {
    await s.close();
  }
});

test('a request larger than the input-token cap is a 400 context_length_exceeded at once (retrying cannot help), never queued', async () => {
  const flow = new WatchedFlow(limits({ maxInputTokens: 10 }));
  const s = await serve(flow);
  try {
    const r = await post(s.url, { prompt: 'the queue and the server and the river and the stone and the long road home' });
    const e = (await r.body.json()) as { error: { code: string; message: string } };
    assert.deepEqual([r.statusCode, e.error.code, r.headers['retry-after']], [400, 'context_length_exceeded', undefined]);
    assert.match(e.error.message, /input-token cap \(10\)/);
    assert.deepEqual([flow.state().queued, flow.state().inFlight, flow.starts], [[0], zero, []]);
  } finally {
    await s.close();
  }
});

test('a waiter past the queue TTL gets 429 rate_limited with Retry-After, and its queue slot is free again', async () => {
  const flow = new WatchedFlow(limits({ maxRequests: 1, queueTtlMs: 150 }));
  const s = await serve(flow, { mock: { cost: { speed: 1, decodeSeqMs: 5 } } });
  try {
    await (await post(s.url, { max_tokens: 2 })).body.json(); // a release, so the drain rate is measured
    const long = post(s.url, { max_tokens: 400, ignore_eos: true });
    await until(() => flow.held === 1, 'the long request running');
    const r = await post(s.url, {});
    const e = (await r.body.json()) as { error: { code: string; type: string } };
    assert.equal(r.statusCode, 429);
    assert.deepEqual([e.error.code, e.error.type], ['rate_limited', 'rate_limit_error']);
    assert.match(String(r.headers['retry-after']), /^[1-9][0-9]*$/);
    assert.deepEqual(flow.state().queued, [0]);
    assert.equal((await (await long).body.json() as { choices: unknown[] }).choices.length, 1);
    const m = await (await request(`${s.url}/metrics`)).body.text();
    assert.match(m, /headroom_flow_decisions_total\{band="0",tenant="default",reason="queue_ttl"\} 1/);
    assert.match(m, /headroom_refusals_total\{reason="flow_cap"\} 1/);
    assert.deepEqual(flow.state().inFlight, zero);
  } finally {
    await s.close();
  }
});

test('a client that disconnects while queued leaves the queue at once and never takes a slot', async () => {
  const flow = new WatchedFlow(limits({ maxRequests: 1 }));
  const s = await serve(flow, { mock: { cost: { speed: 1, decodeSeqMs: 5 } } });
  try {
    const long = hold(s.url);
    await until(() => flow.held === 1, 'the long request running');
    const ac = new AbortController();
    const waiting = post(s.url, {}, {}, ac.signal).catch((e: unknown) => e);
    await until(() => flow.state().queued[0] === 1, 'the second request queued');
    const during = await (await request(`${s.url}/metrics`)).body.text();
    assert.match(during, /^headroom_flow_queued\{band="0"\} 1$/m);
    assert.match(during, /^headroom_flow_in_flight_requests 1$/m);
    ac.abort();
    await waiting;
    await until(() => flow.state().queued[0] === 0, 'the queue emptied by the disconnect', 1000);
    assert.equal(flow.held, 1, 'the long request alone holds a slot');
    await long.stop();
    await until(() => flow.held === 0, 'the long request released');
    assert.deepEqual(flow.starts, ['default'], 'the disconnected request never started');
    assert.deepEqual(flow.state().inFlight, zero);
    const stats = (await (await request(`${s.url}/stats`)).body.json()) as { flow: { queued: number[]; inFlight: typeof zero } };
    assert.deepEqual([stats.flow.queued, stats.flow.inFlight], [[0], zero]);
    const after = await (await request(`${s.url}/metrics`)).body.text();
    assert.match(after, /^headroom_flow_decisions_total\{band="0",tenant="default",reason="client_left"\} 1$/m);
    assert.match(after, /^headroom_flow_queued\{band="0"\} 0$/m);
  } finally {
    await s.close();
  }
});

test('two tenants with unequal load (12 requests against 4) take turns while both wait: 4 and 4 of the first 8 starts', async () => {
  const flow = new WatchedFlow(limits({ maxRequests: 1 }));
  const s = await serve(flow, { keys: KEYS, mock: { cost: { speed: 1, decodeSeqMs: 2 } } });
  try {
    const first = hold(s.url, AUTH.a);
    await until(() => flow.held === 1, 'a request running');
    const all: Promise<number>[] = [];
    for (let i = 0; i < 12; i++) all.push(post(s.url, {}, AUTH.a).then(async (r) => (await r.body.json(), r.statusCode)));
    await until(() => flow.state().queued[0] === 12, 'team-a queued');
    for (let i = 0; i < 4; i++) all.push(post(s.url, {}, AUTH.b).then(async (r) => (await r.body.json(), r.statusCode)));
    await until(() => flow.state().queued[0] === 16, 'both queued');
    await first.stop();
    assert.deepEqual(new Set(await Promise.all(all)), new Set([200]));
    const turns = flow.starts.slice(1, 9);
    assert.deepEqual([turns.filter((t) => t === 'team-a').length, turns.filter((t) => t === 'team-b').length], [4, 4], turns.join(' '));
  } finally {
    await s.close();
  }
});

test('priority bands: at 1 of 2 slots band 0 (share 0.5) is refused with 429 while the top band is served; a bad x-headroom-priority is a 400', async () => {
  const flow = new WatchedFlow(limits({ maxRequests: 2, shares: [0.5, 1], queueSize: 0 }));
  const s = await serve(flow, { mock: { cost: { speed: 1, decodeSeqMs: 5 } } });
  try {
    const long = hold(s.url, { 'x-headroom-priority': '1' });
    await until(() => flow.held === 1, 'one running');
    const low = await post(s.url, {}, { 'x-headroom-priority': '0' });
    assert.equal(low.statusCode, 429);
    assert.ok(Number(low.headers['retry-after']) >= 1);
    await low.body.json();
    const high = await post(s.url, {}); // no header: the top band
    assert.equal(high.statusCode, 200);
    await high.body.json();
    for (const bad of ['2', '-1', 'high', '0.5']) {
      const r = await post(s.url, {}, { 'x-headroom-priority': bad });
      const e = (await r.body.json()) as { error: { code: string; param: string } };
      assert.deepEqual([r.statusCode, e.error.code, e.error.param], [400, 'invalid_value', 'x-headroom-priority'], bad);
    }
    await long.stop();
    await until(() => flow.held === 0, 'the long request released');
    const m = await (await request(`${s.url}/metrics`)).body.text();
    assert.match(m, /headroom_flow_decisions_total\{band="0",tenant="default",reason="queue_full"\} 1/);
    assert.match(m, /headroom_flow_decisions_total\{band="1",tenant="default",reason="admitted"\} 2/);
    assert.deepEqual(flow.state().inFlight, zero);
  } finally {
    await s.close();
  }
});

test('the slot comes back exactly once however a request ends: finish, a 400 after the slot was taken, abort mid-stream, admission refusal, engine error', async () => {
  let refuse = false;
  const admission = {
    name: 'refuse-on-demand',
    needsFeatures: false,
    decide: () => (refuse ? { admit: false as const, boundMs: 9000, reason: 'over_budget', memo: null, refusal: refusal('conformal') } : { admit: true as const, boundMs: 1, reason: 'fits', memo: null }),
    observe: () => undefined,
    state: () => ({}),
  };
  const runner = new FlakyRunner({ cost: { speed: 1, decodeSeqMs: 5 } });
  const flow = new WatchedFlow(limits({ maxRequests: 2 }));
  const s = await serve(flow, { runner, admission: admission as never, server: { logLevel: 'silent', maxOutputTokens: 64 } });
  const settled = async (what: string): Promise<void> => {
    await until(() => flow.held === 0, `${what}: the ticket released`);
    assert.deepEqual(flow.state().inFlight, zero, what);
  };
  try {
    assert.equal((await post(s.url, {})).statusCode, 200);
    await settled('finish');
    const tooMany = await post(s.url, { max_tokens: 10_000 });
    assert.equal(tooMany.statusCode, 400);
    await tooMany.body.json();
    await settled('a 400 from prepare');
    const ac = new AbortController();
    const r = await post(s.url, { max_tokens: 60, ignore_eos: true, stream: true }, {}, ac.signal);
    for await (const _ of r.body) break; // the first bytes
    ac.abort();
    await settled('client abort mid-stream');
    refuse = true;
    const refused = await post(s.url, {});
    assert.equal(refused.statusCode, 503);
    await refused.body.json();
    refuse = false;
    await settled('admission refusal');
    runner.failNext = 'fail';
    const failed = await post(s.url, {});
    await failed.body.text();
    await settled('engine error');
    assert.equal(flow.peak, 1);
  } finally {
    await s.close();
  }
});
