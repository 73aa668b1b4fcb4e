// The step loop sleeps when idle (no busy-spin) and wakes on arrival; the capacity bound refuses
// with 503 + Retry-After and counts those refusals apart from others.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { request } from 'undici';
import { Engine } from '../../src/engine/engine.ts';
import { MockRunner } from '../../src/engine/runner/mock/mock-runner.ts';
import { FifoScheduler } from '../../src/engine/scheduler/fifo.ts';
import { WaitQueue } from '../../src/engine/scheduler/wait-queue.ts';
import { makeRequest, sinkFor } from '../helpers/engine-driver.ts';
import type { Outcome } from '../helpers/engine-driver.ts';
import { startTestServer } from '../helpers/headroom.ts';
import { delaysAdmitted } from '../../src/admission/decision/protect.ts';
import { NUM_FEATURES, extractFeatures } from '../../src/admission/features.ts';
import type { EngineSnapshot } from '../../src/engine/snapshot.ts';

test('an idle engine sleeps (no schedule calls) and wakes at once on arrival', async () => {
  const runner = new MockRunner({ cost: { speed: 0 } });
  const scheduler = new FifoScheduler({ maxBatchTokens: 512, queue: new WaitQueue() });
  let calls = 0;
  const schedule = scheduler.schedule.bind(scheduler);
  scheduler.schedule = (now) => (calls++, schedule(now));
  const engine = new Engine(runner, scheduler, { maxQueuedRequests: 10 });
  engine.start();
  await new Promise((r) => setTimeout(r, 300));
  assert.ok(calls <= 1, `the idle loop called schedule() ${calls} times in 300 ms`);
  const out: Outcome[] = [];
  const t0 = performance.now();
  const req = makeRequest(engine, { prompt: 'wake up', maxTokens: 3 }, 'w', out);
  engine.submit(req, sinkFor(req));
  await engine.whenIdle();
  assert.equal(out[0]!.reason, 'length');
  assert.ok(performance.now() - t0 < 200, 'the arrival woke the loop at once');
  const afterWork = calls;
  await new Promise((r) => setTimeout(r, 300));
  assert.ok(calls - afterWork <= 1, 'back to sleep after the work');
  await engine.stop();
});

test('the capacity bound refuses with 503 capacity + Retry-After, counted apart', async () => {
  const server = await startTestServer({ maxQueuedRequests: 2, mock: { cost: { speed: 3 } } });
  try {
    const send = () =>
      request(`${server.url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'headroom-mock', prompt: 'hold', max_tokens: 40 }) });
    const responses = await Promise.all(Array.from({ length: 6 }, send));
    const statuses = responses.map((r) => r.statusCode);
    const bodies = await Promise.all(responses.map((r) => r.body.json() as Promise<{ error?: { code: string } }>));
    assert.equal(statuses.filter((s) => s === 200).length, 2, `statuses ${statuses.join(',')}`);
    responses.forEach((r, i) => {
      if (r.statusCode === 200) return;
      assert.equal(r.statusCode, 503);
      assert.equal(bodies[i]!.error?.code, 'capacity');
      assert.ok(Number(r.headers['retry-after']) >= 1);
    });
    const stats = server.headroom.engine.stats();
    assert.deepEqual(stats.refusals, { capacity: 4, draining: 0, engine_failed: 0 });
  } finally {
    await server.close();
  }
});

test('the snapshot carries a short and a long step-time average: seeded by the warm-up, the long one slow to follow', async () => {
  // A clock the test moves: every runner call takes 10 ms of engine time.
  let now = 0;
  const runner = new MockRunner({ cost: { speed: 0 } });
  const execute = runner.execute.bind(runner);
  runner.execute = async (plan) => {
    now += 10;
    return execute(plan);
  };
  const scheduler = new FifoScheduler({ maxBatchTokens: 512, queue: new WaitQueue() });
  const engine = new Engine(runner, scheduler, { maxQueuedRequests: 10, clock: { nowMs: () => now } });
  engine.seedAverages({ stepMs: 2, prefillTokensPerS: 1000, decodeTokensPerS: 500 });
  assert.equal(engine.snapshot().longStepMs, 2, 'seeded');
  engine.start();
  const out: Outcome[] = [];
  const req = makeRequest(engine, { prompt: 'steady steps', maxTokens: 40 }, 's', out);
  engine.submit(req, sinkFor(req));
  await engine.whenIdle();
  const s = engine.snapshot();
  assert.ok(s.avgStepMs !== null && s.avgStepMs > 9.9, `the short average follows at once: ${s.avgStepMs}`);
  // About 40 steps of 10 ms at α = 1/256 from 2 ms: 2 + 8·(1 − (255/256)^40) ≈ 3.1 ms.
  assert.ok(s.longStepMs !== null && s.longStepMs > 2.5 && s.longStepMs < 4, `the long average moves slowly: ${s.longStepMs}`);
  await engine.stop();
});

test("the snapshot carries each running request's deadline and remaining output, and protection reads them", async () => {
  // A clock the test moves: every runner call takes 10 ms. The snapshot is taken inside the 11th call,
  // with one request of 50 tokens and a 1,000 ms budget decoding.
  let now = 0;
  let calls = 0;
  let seen: EngineSnapshot | null = null;
  const runner = new MockRunner({ cost: { speed: 0 } });
  const execute = runner.execute.bind(runner);
  const scheduler = new FifoScheduler({ maxBatchTokens: 512, queue: new WaitQueue() });
  const engine = new Engine(runner, scheduler, { maxQueuedRequests: 10, clock: { nowMs: () => now } });
  runner.execute = async (plan) => {
    now += 10;
    if (++calls === 11) seen = engine.snapshot(true);
    return execute(plan);
  };
  engine.seedAverages({ stepMs: 10, prefillTokensPerS: 1000, decodeTokensPerS: 100 });
  engine.start();
  const out: Outcome[] = [];
  const req = makeRequest(engine, { prompt: 'a running request', maxTokens: 50, sloMs: 1000 }, 'r', out);
  engine.submit(req, sinkFor(req));
  await engine.whenIdle();
  await engine.stop();
  const s = seen as EngineSnapshot | null;
  assert.ok(s !== null && s.runningDeadlines !== undefined);
  assert.equal(s.numRunning, 1);
  const generated = out[0]!.request.outputTokens.length;
  assert.equal(generated, 50);
  // No output has ended yet, so its remaining length is all that max_tokens leaves.
  const [deadlineMs, left] = s.runningDeadlines;
  assert.equal(deadlineMs, req.deadlineMs);
  assert.ok(left! > 30 && left! < 50, `remaining ${String(left)} of 50 after ten steps`);
  // What admission reads off it: a request whose prefill (800 tokens at the engine's measured
  // prefill rate, at most a few thousand per second here) pushes the running one from on time
  // (~40 steps of 10 ms) to late is refused by the protection rule; a 10-token one is not.
  const ctx = { requestId: 'n', arrivalMs: s.atMs, sloMs: 4000, numPromptTokens: 800, numCachedTokens: 0, maxTokens: 10, n: 1, numMessages: 1, ttftBudgetMs: null };
  assert.equal(delaysAdmitted(extractFeatures(ctx, s, new Float64Array(NUM_FEATURES)), s), req.deadlineMs);
  assert.equal(delaysAdmitted(extractFeatures({ ...ctx, numPromptTokens: 10 }, s, new Float64Array(NUM_FEATURES)), s), null);
});
