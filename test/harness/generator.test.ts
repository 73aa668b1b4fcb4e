// The generator against the sleep stub: latency from intended arrival, a slow server does not slow
// the arrivals, warm-up rows flagged not dropped, censored rows, shed rows, closed loop labelled.
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { runClosedLoop, runOpenLoop } from '../../src/harness/generator.ts';
import type { ClientOptions } from '../../src/harness/client.ts';
import type { RequestSpec } from '../../src/harness/workloads.ts';
import { arrivalTimesMs } from '../../src/harness/arrivals.ts';
import { quantileSorted, sortedCopy } from '../../src/harness/stats.ts';
import { startStubServer } from '../../src/harness/stub-server.ts';
import type { StubHandle } from '../../src/harness/stub-server.ts';
import { spawnStub } from '../../src/harness/stub-process.ts';
import type { StubProcess } from '../../src/harness/stub-process.ts';
import { summarize } from '../../src/harness/report.ts';

const spec: RequestSpec = { klass: 'uniform', prefixId: null, messages: [{ role: 'user', content: 'hello there' }], promptTokensEst: 2, maxTokens: 3 };
const client = (url: string, timeoutMs = 10_000): ClientOptions => ({
  origin: url,
  path: '/v1/chat/completions',
  model: 'stub',
  timeoutMs,
  sloHeaderMs: null,
  ignoreEos: true,
});
const specs = (n: number): RequestSpec[] => Array.from({ length: n }, () => spec);

let fast: StubHandle;
before(async () => {
  fast = await startStubServer({ ttftMs: 20, tokenMs: 2, maxOutputTokens: 3 });
});
after(async () => {
  await fast.close();
});

test('latency is measured from the intended arrival, so a late send is charged to the request', async () => {
  const arrivalsMs = Float64Array.from([0, 50, 100, 150, 400]);
  const done = runOpenLoop({ client: client(fast.url), arrivalsMs, specs: specs(5), durationMs: 500, warmupMs: 0, cooldownMs: 0 });
  // Block the event loop for 300 ms: arrivals at 50, 100 and 150 ms can only be sent at ~300 ms.
  const until = performance.now() + 300;
  while (performance.now() < until) {
    // busy
  }
  const recs = await done;
  assert.equal(recs.length, 5);
  for (const r of recs) {
    assert.equal(r.outcome, 'ok', JSON.stringify(r));
    assert.ok(Math.abs(r.slip_ms - (r.sent_ms - r.intended_ms)) < 1e-9);
    // The stub sleeps 20 ms before the first token: TTFT >= slip + 20 ms.
    assert.ok((r.ttft_ms ?? 0) >= r.slip_ms + 19, `ttft ${r.ttft_ms} slip ${r.slip_ms}`);
    assert.ok((r.e2e_ms ?? 0) >= (r.ttft_ms ?? 0));
  }
  const late = recs.filter((r) => r.intended_ms === 50)[0];
  assert.ok(late !== undefined && late.slip_ms > 200, `slip ${late?.slip_ms}`);
  assert.ok((late.e2e_ms ?? 0) > 220, `e2e of a request sent 200+ ms late: ${late.e2e_ms}`);
});

test('a slow server does not slow the arrivals (stub in its own process, 5 rps capacity, offered 100 rps)', async () => {
  let slow: StubProcess | null = null;
  try {
    slow = await spawnStub({ slots: 1, ttftMs: 200, maxOutputTokens: 1 });
    const arrivalsMs = arrivalTimesMs({ kind: 'poisson', ratePerS: 100, durationS: 2, gammaShape: 1, seed: 11 });
    const recs = await runOpenLoop({ client: client(slow.url, 400), arrivalsMs, specs: specs(arrivalsMs.length), durationMs: 2000, warmupMs: 0, cooldownMs: 0 });
    assert.equal(recs.length, arrivalsMs.length);
    const slip = sortedCopy(recs.map((r) => r.slip_ms));
    // Bounds an order of magnitude from what a server-paced generator would show (the server takes
    // one request per 200 ms: its median slip would be ~20 s and its span ~40 s), and far enough from
    // zero that a loaded machine's scheduling noise cannot trip them (the generator's timing on a
    // quiet machine is measured by every bench run's own validation: slip p99 in meta.json).
    assert.ok(quantileSorted(slip, 0.5) < 2000, `slip p50 ${quantileSorted(slip, 0.5)}`);
    // The sends span the schedule, not the server's pace (which would need 40 s for these).
    const sent = recs.map((r) => r.sent_ms);
    const span = Math.max(...sent) - Math.min(...sent);
    const planned = (arrivalsMs[arrivalsMs.length - 1] ?? 0) - (arrivalsMs[0] ?? 0);
    assert.ok(Math.abs(span - planned) < 2000, `sent span ${span} vs planned ${planned}`);
    // Slip does not build up over the run (a server-paced generator's grows by 200 ms per request: ~10 s between the quarters).
    const bySend = [...recs].sort((a, b) => a.intended_ms - b.intended_ms).map((r) => r.slip_ms);
    const quarter = Math.floor(bySend.length / 4);
    const firstQ = quantileSorted(sortedCopy(bySend.slice(0, quarter)), 0.5);
    const lastQ = quantileSorted(sortedCopy(bySend.slice(-quarter)), 0.5);
    assert.ok(lastQ - firstQ < 1000, `median slip ${firstQ.toFixed(1)} ms in the first quarter, ${lastQ.toFixed(1)} ms in the last`);
    // Most could not be served in time: they are censored rows, not missing rows.
    assert.ok(recs.filter((r) => r.censored).length > recs.length / 2);
  } finally {
    await slow?.stop();
  }
});

test('warm-up and cool-down rows are flagged, never dropped, and kept out of the steady numbers', async () => {
  const arrivalsMs = Float64Array.from([10, 100, 250, 400, 600, 750, 900, 990]);
  const recs = await runOpenLoop({ client: client(fast.url), arrivalsMs, specs: specs(8), durationMs: 1000, warmupMs: 300, cooldownMs: 200 });
  assert.equal(recs.length, 8);
  assert.deepEqual(
    recs.map((r) => r.phase),
    ['warmup', 'warmup', 'warmup', 'steady', 'steady', 'steady', 'cooldown', 'cooldown'],
  );
  const s = summarize(recs, { sloMs: 1000, windowS: 0.5, timeoutMs: 10_000 });
  assert.equal(s.num_arrivals, 3);
  assert.equal(s.num_warmup, 3);
  assert.equal(s.num_cooldown, 2);
  assert.equal(s.offered_rate, 6);
});

test('a client timeout gives a censored row: no E2E, outcome timeout, and a miss in the report', async () => {
  const STUB_TTFT_MS = 400;
  const sleepy = await startStubServer({ ttftMs: STUB_TTFT_MS, maxOutputTokens: 1 });
  try {
    const recs = await runOpenLoop({ client: client(sleepy.url, 100), arrivalsMs: Float64Array.from([0, 5, 10]), specs: specs(3), durationMs: 20, warmupMs: 0, cooldownMs: 0 });
    for (const r of recs) {
      assert.equal(r.outcome, 'timeout');
      assert.equal(r.censored, true);
      assert.equal(r.e2e_ms, null);
      // Gave up at its own timeout, before the stub's first byte would have come (no fixed slack: a
      // loaded machine fires the 100 ms timer late, but not past the 400 ms response).
      assert.ok(r.end_ms - r.sent_ms >= 95 && r.end_ms - r.sent_ms < STUB_TTFT_MS, `waited ${r.end_ms - r.sent_ms}`);
    }
    const s = summarize(recs, { sloMs: 50, windowS: 1, timeoutMs: 100 });
    assert.equal(s.num_timeouts, 3);
    assert.equal(s.request_goodput, 0);
    assert.equal(s.median_e2el_ms, Infinity);
  } finally {
    await sleepy.close();
  }
});

test('503 and 429 with Retry-After are shed rows, not errors', async () => {
  const tight = await startStubServer({ slots: 1, queueLimit: 0, ttftMs: 150, maxOutputTokens: 1, retryAfterS: 2 });
  try {
    const recs = await runOpenLoop({ client: client(tight.url), arrivalsMs: Float64Array.from([0, 20, 40]), specs: specs(3), durationMs: 100, warmupMs: 0, cooldownMs: 0 });
    assert.deepEqual(recs.map((r) => r.outcome), ['ok', 'shed', 'shed']);
    for (const r of recs.slice(1)) {
      assert.equal(r.http_status, 503);
      assert.equal(r.retry_after_s, 2);
      assert.equal(r.shed_reason, 'queue_full');
      assert.equal(r.error, null);
    }
    assert.equal(recs[0]?.prompt_tokens, 2, 'usage.prompt_tokens recorded from the stream');
    assert.equal(recs[0]?.completion_tokens, 1);
  } finally {
    await tight.close();
  }
});

test('closed loop: N workers, never more than N in flight, every row labelled closed', async () => {
  const recs = await runClosedLoop({ client: client(fast.url), concurrency: 3, durationMs: 300, warmupMs: 0, cooldownMs: 0, nextSpec: () => spec });
  assert.ok(recs.length >= 6, `rows ${recs.length}`);
  for (const r of recs) {
    assert.equal(r.loop, 'closed');
    assert.ok(r.worker !== null && r.worker >= 0 && r.worker < 3);
  }
  const events = recs.flatMap((r) => [[r.sent_ms, 1], [r.end_ms, -1]] as const).sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let inFlight = 0;
  for (const [, d] of events) {
    inFlight += d;
    assert.ok(inFlight <= 3);
  }
});
