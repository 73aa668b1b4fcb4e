// The demo's client-side numbers (SideTally) and the two generator hooks the demo relies on:
// onRecord sees every record as it ends, and aborting the signal stops the schedule and every
// request in flight at once (Ctrl-C must not wait for a backed-up engine).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { runOpenLoop } from '../../src/harness/generator.ts';
import type { RequestRecord } from '../../src/harness/record.ts';
import { startStubServer } from '../../src/harness/stub-server.ts';
import type { StubHandle } from '../../src/harness/stub-server.ts';
import type { RequestSpec } from '../../src/harness/workloads.ts';
import { nearestRank, SideTally } from '../../src/demo/tally.ts';

function rec(over: Partial<RequestRecord>): RequestRecord {
  return {
    request_id: 0, loop: 'open', worker: null, klass: 'uniform', prefix_id: null, phase: 'steady', intended_ms: 0, sent_ms: 0, slip_ms: 0,
    headers_ms: null, ttft_ms: null, e2e_ms: null, end_ms: 0, itl_ms: [], num_chunks: 0, prompt_tokens_est: 1, prompt_tokens: null,
    completion_tokens: null, max_tokens: 1, http_status: null, outcome: 'ok', shed_reason: null, retry_after_s: null, error: null, censored: false,
    ...over,
  };
}

test('SideTally: goodput, refusals with Retry-After, given-up requests above the timeout, outstanding per second', () => {
  const t = new SideTally({ sloMs: 1000, durationS: 4, arrivalsMs: Float64Array.from([100, 200, 300, 1100, 1200, 2500]) });
  t.add(rec({ outcome: 'ok', e2e_ms: 500, end_ms: 600 }));
  t.add(rec({ outcome: 'ok', e2e_ms: 1500, end_ms: 1700 }));
  t.add(rec({ outcome: 'shed', retry_after_s: 2, end_ms: 1101 }));
  t.add(rec({ outcome: 'shed', retry_after_s: null, end_ms: 1201 }));
  t.add(rec({ outcome: 'timeout', end_ms: 3300 }));
  t.setSent(6);
  const d = t.data(4);
  assert.equal(d.numSent, 6);
  assert.equal(d.numDone, 5);
  assert.deepEqual([d.numGood, d.numLate, d.numTimedOut, d.numRefused, d.numRetryAfter], [1, 1, 1, 2, 1]);
  assert.equal(d.retryAfterMedianS, 2);
  assert.equal(d.goodputRps, 0.25);
  assert.equal(d.numAdmittedDone, 3);
  assert.equal(d.admittedInSlo, 0.333);
  assert.equal(d.p50E2eMs, 1500);
  assert.equal(d.p99E2eMs, 'timeout', 'a request given up on is above every completed one');
  assert.deepEqual(d.series.arrivals, [3, 2, 1, 0]);
  assert.deepEqual(d.series.good, [1, 0, 0, 0]);
  assert.deepEqual(d.series.late, [0, 1, 0, 1]);
  assert.deepEqual(d.series.refused, [0, 2, 0, 0]);
  assert.deepEqual(d.series.outstanding, [2, 1, 2, 1]);
  assert.equal((JSON.parse(JSON.stringify(d)) as { p99E2eMs: unknown }).p99E2eMs, 'timeout', 'survives JSON (Infinity would not)');
  // Past the schedule's end the goodput is per second of the schedule.
  assert.equal(t.data(10).goodputRps, 0.25);
});

test('nearestRank: empty, ranks, Infinity as timeout', () => {
  assert.equal(nearestRank([], 0.5), null);
  assert.equal(nearestRank([1, 2, 3, 4], 0.5), 2);
  assert.equal(nearestRank([1, 2, 3, 4], 0.99), 4);
  assert.equal(nearestRank([1, Infinity], 0.99), 'timeout');
});

let stub: StubHandle;
before(async () => {
  stub = await startStubServer({ ttftMs: 2000, tokenMs: 5, maxOutputTokens: 3 });
});
after(async () => {
  await stub.close();
});

test('runOpenLoop: onRecord sees every record; aborting stops the schedule and ends requests in flight at once', async () => {
  const spec: RequestSpec = { klass: 'uniform', prefixId: null, messages: [{ role: 'user', content: 'hi' }], promptTokensEst: 1, maxTokens: 3 };
  const arrivalsMs = Float64Array.from({ length: 40 }, (_, i) => i * 100);
  const ac = new AbortController();
  const seen: RequestRecord[] = [];
  const t0 = performance.now();
  setTimeout(() => ac.abort(), 450);
  const records = await runOpenLoop({
    client: { origin: stub.url, path: '/v1/chat/completions', model: 'stub', timeoutMs: 30_000, sloHeaderMs: null, ignoreEos: true },
    arrivalsMs,
    specs: arrivalsMs.length === 0 ? [] : Array.from(arrivalsMs, () => spec),
    durationMs: 4000,
    warmupMs: 0,
    cooldownMs: 0,
    onRecord: (r) => seen.push(r),
    signal: ac.signal,
  });
  const tookMs = performance.now() - t0;
  assert.ok(tookMs < 1500, `returned ${Math.round(tookMs)} ms after the start (the stub answers after 2 s)`);
  assert.ok(records.length >= 4 && records.length <= 6, `${records.length} arrivals sent before the abort at 450 ms`);
  assert.ok(records.every((r) => r.outcome === 'transport_error'), 'every request in flight was ended');
  await new Promise((r) => setImmediate(r));
  assert.equal(seen.length, records.length, 'onRecord saw each record');
});
