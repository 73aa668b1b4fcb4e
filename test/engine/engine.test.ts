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
