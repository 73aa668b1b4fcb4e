// Admission in gateway mode: the controller decides every request after flow control on the
// gateway's books of what is in flight upstream; a refusal is 503 slo_unattainable with
// Retry-After and never reaches the upstream; an admitted request's outcome (as the gateway
// measured it) goes back to the controller and into the trace.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { request } from 'undici';
import type { AdmissionController, AdmissionDecision, AdmissionOutcome } from '../../src/admission/controller.ts';
import { createAdmissionController } from '../../src/admission/factory.ts';
import { FEATURE_NAMES } from '../../src/admission/features.ts';
import { refusal } from '../../src/backend/refusal.ts';
import type { EngineSnapshot } from '../../src/engine/snapshot.ts';
import { startTestGateway, within } from '../helpers/gateway.ts';
import { streamCompletion } from '../helpers/sse.ts';
import { StubUpstream } from '../helpers/stub-upstream.ts';

/** Admits while fewer than `limit` requests are in the gateway's books; records what it saw and learned. */
class CountingController implements AdmissionController {
  readonly name = 'counting';
  readonly needsFeatures = true;
  readonly seen: { waiting: number; running: number; promptTokens: number; slots: number }[] = [];
  readonly outcomes: AdmissionOutcome[] = [];
  constructor(readonly limit: number) {}
  decide(_ctx: unknown, s: EngineSnapshot | null, x: Float64Array): AdmissionDecision {
    assert.ok(s !== null, 'gateway mode decides on a snapshot of its books');
    this.seen.push({ waiting: s.numWaiting, running: s.numRunning, promptTokens: x[FEATURE_NAMES.indexOf('prompt_tokens')]!, slots: s.maxSequences });
    const memo = { e2ePredictionMs: 1, ttftPredictionMs: null, sloMs: 1000, ttftBudgetMs: null };
    if (s.numWaiting + s.numRunning < this.limit) return { admit: true, boundMs: 1, reason: 'fits', memo };
    return { admit: false, boundMs: 99_999, reason: 'over_budget', memo, refusal: refusal('conformal', { message: 'too busy', retryAfterS: 7 }) };
  }
  observe(_x: Float64Array, _d: AdmissionDecision, o: AdmissionOutcome): void {
    this.outcomes.push(o);
  }
  state(): Record<string, unknown> {
    return { name: this.name };
  }
}

const post = (url: string, body: unknown, headers: Record<string, string> = {}) => request(`${url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });

test('gateway admission: decides on the books, refuses with 503 + Retry-After before the upstream, learns and traces outcomes', async () => {
  const stub = await new StubUpstream({ tokens: 3, autoRelease: false }).start();
  stub.slots = 4;
  const dir = mkdtempSync(path.join(os.tmpdir(), 'hr-gw-adm-'));
  const traceOut = path.join(dir, 'trace.jsonl');
  const controller = new CountingController(1);
  const gw = await startTestGateway([stub.url], { admission: controller, traceOut });
  const body = { model: 'stub-model', prompt: 'x'.repeat(400), max_tokens: 3, stream: true };
  try {
    const first = streamCompletion(gw.url, body);
    await within(stub.waitForRequests(1), 'the first request to reach the upstream');
    const second = await post(gw.url, body);
    assert.equal(second.statusCode, 503);
    assert.equal(((await second.body.json()) as { error: { code: string } }).error.code, 'slo_unattainable');
    assert.equal(second.headers['retry-after'], '7');
    assert.equal(stub.requests.length, 1, 'the refused request never reached the upstream');
    stub.release(10);
    assert.ok((await first).sawDone);
    // The stream is over: the books are empty again and the next request is admitted.
    const third = await streamCompletion(gw.url, body);
    assert.ok(third.sawDone);

    assert.deepEqual(controller.seen.map((s) => [s.waiting, s.running]), [[0, 0], [1, 0], [0, 0]]);
    assert.equal(controller.seen[0]!.promptTokens, 100, '400 prompt bytes at 4 bytes a token');
    assert.equal(controller.seen[0]!.slots, 4, "the upstream's /props total_slots");
    assert.equal(controller.outcomes.length, 2, 'each admitted request reports back once');
    for (const o of controller.outcomes) {
      assert.equal(o.censored, false);
      assert.ok(o.ttftMs !== null && o.e2eMs !== null && o.ttftMs <= o.e2eMs);
    }
    await gw.close();
    const rows = readFileSync(traceOut, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { admitted: boolean; outcome: string; features: Record<string, number>; e2e_ms: number | null });
    assert.deepEqual(rows.map((r) => [r.admitted, r.outcome]).sort(), [[false, 'refused'], [true, 'length'], [true, 'length']]);
    assert.equal(rows.find((r) => !r.admitted)!.features['waiting'], 1, 'the refused row holds the features the decision saw');
    assert.ok(rows.filter((r) => r.admitted).every((r) => r.e2e_ms !== null && r.e2e_ms >= 0));
  } finally {
    await gw.close().catch(() => undefined);
    await stub.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('gateway admission: a client that leaves mid-stream is a censored outcome and leaves the books', async () => {
  const stub = await new StubUpstream({ tokens: 50, autoRelease: false }).start();
  const controller = new CountingController(10);
  const gw = await startTestGateway([stub.url], { admission: controller });
  try {
    const ac = new AbortController();
    // The gateway answers once the upstream's first bytes arrive: two tokens are let out first.
    stub.release(2);
    const res = await request(`${gw.url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'stub-model', prompt: 'hi', max_tokens: 50, stream: true }), signal: ac.signal });
    for await (const chunk of res.body) {
      if (String(chunk).includes('t1')) break;
    }
    ac.abort();
    await within(stub.waitForAbort(), 'the upstream to see the disconnect');
    await within((async () => { while (controller.outcomes.length === 0) await new Promise((r) => setTimeout(r, 5)); })(), 'the outcome');
    assert.equal(controller.outcomes[0]!.censored, true);
    assert.equal(gw.gateway.backend.books[0]!.numInFlight, 0);
  } finally {
    await gw.close();
    await stub.stop();
  }
});

test('gateway admission: the conformal controller, calibrated on what it saw, refuses a budget the upstream cannot meet', async () => {
  // Paced output, so the books measure a step time and a decode rate (an upstream that answers in one burst leaves them cold, and a cold upstream's requests are admitted).
  const stub = await new StubUpstream({ tokens: 4, tokenDelayMs: 5 }).start();
  const controller = createAdmissionController({ mode: 'conformal', guarantee: 0.9, minOutcomes: 20, headroom: false });
  const gw = await startTestGateway([stub.url], { admission: controller, server: { minSloMs: 1 } });
  const body = { model: 'stub-model', prompt: 'hello there', max_tokens: 4, stream: true };
  try {
    for (let i = 0; i < 40; i++) assert.ok((await streamCompletion(gw.url, body)).sawDone);
    // Each request took at least a millisecond through two HTTP hops: a 1 ms budget cannot be
    // bounded. On idle books the exploration quota (4 per 10 s) may still admit a few as probes.
    let refused: Awaited<ReturnType<typeof post>> | null = null;
    let probes = 0;
    while (refused === null && probes <= 4) {
      const res = await post(gw.url, body, { 'x-slo-ms': '1' });
      if (res.statusCode === 503) refused = res;
      else {
        assert.equal(res.statusCode, 200);
        await res.body.dump();
        probes++;
      }
    }
    assert.ok(refused !== null, `a 1 ms budget was admitted ${probes} times`);
    assert.equal(((await refused.body.json()) as { error: { code: string } }).error.code, 'slo_unattainable');
    assert.ok(Number(refused.headers['retry-after']) >= 1);
    const ok = await streamCompletion(gw.url, body, '/v1/completions', { 'x-slo-ms': '60000' });
    assert.ok(ok.sawDone, 'a generous budget is admitted');
    const stats = (await (await request(`${gw.url}/stats`)).body.json()) as { admission: { numRefused: number; numDecisions: number; reasons: Record<string, number> } };
    assert.equal(stats.admission.numRefused, 1);
    assert.equal(stats.admission.numDecisions, 42 + probes);
    // The books measured a step of at least 5 ms: 1 ms is below the request's own prefill plus one
    // step, refused before the bound or the exploration quota is asked.
    assert.equal(stats.admission.reasons['below_floor'], 1);
    assert.equal(probes, 0);
  } finally {
    await gw.close();
    await stub.stop();
  }
});

test('gateway: non-streamed answers teach the books the decode rate (their usage, counted when the body arrives)', async () => {
  const clock = { t: 0, nowMs(): number { return this.t; } };
  const stub = await new StubUpstream({ tokens: 6 }).start();
  const gw = await startTestGateway([stub.url], { clock });
  try {
    const ask = async (): Promise<void> => {
      const res = await request(`${gw.url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'stub-model', prompt: 'hello', max_tokens: 6 }) });
      assert.equal(res.statusCode, 200);
      await res.body.text();
    };
    await ask();
    clock.t += 1000;
    await ask();
    // The first answer's 6 tokens over the 1 s until the second.
    assert.equal(gw.gateway.backend.books[0]!.snapshot(true).decodeTokensPerS, 6);
  } finally {
    await gw.close();
    await stub.stop();
  }
});

/**
 * Two held-open stubs behind a gateway whose picker follows prefix affinity alone (no load weights),
 * so a prompt goes where it went before; the first request (prompt 'a') is sent and holds one of them.
 */
async function oneBusyOneIdle(controller: AdmissionController) {
  const [a, b] = await Promise.all([new StubUpstream({ tokens: 3, autoRelease: false }).start(), new StubUpstream({ tokens: 3, autoRelease: false }).start()]);
  const gw = await startTestGateway([a.url, b.url], { admission: controller, picker: { prefixWeight: 1, queueWeight: 0, kvWeight: 0 } });
  const body = (p: string) => ({ model: 'stub-model', prompt: p.repeat(200), max_tokens: 3, stream: true });
  const close = async (): Promise<void> => {
    await gw.close();
    await Promise.all([a.stop(), b.stop()]);
  };
  const first = streamCompletion(gw.url, body('a'));
  try {
    await within(Promise.race([a.waitForRequests(1), b.waitForRequests(1)]), 'the first request upstream');
  } catch (err) {
    await close();
    throw err;
  }
  const busy = a.requests.length === 1 ? a : b;
  const idle = busy === a ? b : a;
  return { gw, body, first, busy, idle, close };
}

test('gateway admission decides on the books of the upstream the request would go to, and sends it there', async () => {
  // Admits while the chosen upstream's books hold fewer than 1 request.
  const controller = new CountingController(1);
  const { gw, body, first, busy, idle, close } = await oneBusyOneIdle(controller);
  try {
    // Another prompt has no affinity: the picker takes the idle upstream, whose books are empty.
    const second = streamCompletion(gw.url, body('b'));
    await within(idle.waitForRequests(1), 'the second request on the other upstream');
    // The first prompt again: affinity picks the busy upstream, whose books are full: refused,
    // although the books of both together are not what decided.
    const third = await post(gw.url, body('a'));
    assert.equal(third.statusCode, 503);
    await third.body.text();
    assert.equal(busy.requests.length + idle.requests.length, 2, 'the refused request went nowhere');
    assert.deepEqual(controller.seen.map((s) => s.waiting + s.running), [0, 0, 1]);
    const stats = gw.gateway.backend.stats() as { gateway: { upstreams: { books: { numInFlight: number } }[] } };
    assert.deepEqual(stats.gateway.upstreams.map((u) => u.books.numInFlight), [1, 1]);
    busy.release(10);
    idle.release(10);
    assert.ok((await first).sawDone && (await second).sawDone);
  } finally {
    await close();
  }
});

test('gateway admission: when the picked upstream\'s bound does not fit and another\'s does, the request goes there instead of being refused', async () => {
  // Fits (and admits) while an upstream's books hold fewer than 1 request; fits() changes nothing.
  const controller = Object.assign(new CountingController(1), {
    fitsCalls: 0,
    fits(this: CountingController & { fitsCalls: number }, _ctx: unknown, s: EngineSnapshot | null): boolean {
      this.fitsCalls++;
      return s !== null && s.numWaiting + s.numRunning < this.limit;
    },
  });
  const { gw, body, first, busy, idle, close } = await oneBusyOneIdle(controller);
  try {
    // The same prompt: affinity picks the busy upstream, whose bound does not fit; the idle one's does.
    const second = streamCompletion(gw.url, body('a'));
    await within(idle.waitForRequests(1), 'the second request on the other upstream');
    assert.equal(busy.requests.length, 1);
    assert.deepEqual(controller.seen.map((s) => s.waiting + s.running), [0, 0], 'decided on the idle upstream\'s books');
    // Both full now: nothing fits, refused on the picked upstream's books.
    const third = await post(gw.url, body('a'));
    assert.equal(third.statusCode, 503);
    await third.body.text();
    assert.equal(busy.requests.length + idle.requests.length, 2, 'the refused request went nowhere');
    assert.deepEqual(controller.seen.map((s) => s.waiting + s.running), [0, 0, 1]);
    assert.ok(controller.fitsCalls >= 3, `fits() asked ${controller.fitsCalls} times`);
    busy.release(10);
    idle.release(10);
    assert.ok((await first).sawDone && (await second).sawDone);
  } finally {
    await close();
  }
});
