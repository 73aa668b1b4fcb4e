// `overlapDispatch`: a step's outputs go to their sinks while the next step computes. The same
// jobs give the same tokens, text and finish reasons either way (the outputs only move in time);
// with it on, step k's outputs reach the sinks after step k+1 has been handed to the runner and
// before that step returns, and with it off, before step k+1 starts; the last step's outputs are
// not lost when the engine goes idle.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Engine } from '../../src/engine/engine.ts';
import type { RunnerPlan, StepResult } from '../../src/engine/plan.ts';
import { MockRunner } from '../../src/engine/runner/mock/mock-runner.ts';
import { createScheduler } from '../../src/engine/scheduler/factory.ts';
import { makeRequest, runJobs, sinkFor } from '../helpers/engine-driver.ts';
import type { Job, Outcome } from '../helpers/engine-driver.ts';

function engine(overlapDispatch: boolean, runner = new MockRunner({ cost: { speed: 0 } })): Engine {
  return new Engine(runner, createScheduler({ scheduler: 'continuous', maxOutputTokens: 256 }, runner.info), { maxQueuedRequests: 1000, overlapDispatch });
}

const JOBS: Job[] = Array.from({ length: 12 }, (_, i) => ({
  prompt: `request ${i} ${'with some words '.repeat(i % 5)}`,
  maxTokens: 1 + ((i * 7) % 23),
  temperature: i % 3 === 0 ? 0 : 0.8,
  seed: 100 + i,
}));

test('overlapDispatch: the same jobs give the same tokens, text and finish reasons as dispatching before the next step', async () => {
  const plain = await runJobs(engine(false), JOBS);
  const overlapped = await runJobs(engine(true), JOBS);
  const view = (o: Outcome[]): unknown => o.map((x) => ({ tokens: x.tokens, text: x.text, reason: x.reason }));
  assert.deepEqual(view(overlapped), view(plain));
  for (const [i, o] of overlapped.entries()) {
    assert.equal(o.reason, 'length', `job ${i} finished`);
    assert.equal(o.tokens.length, JOBS[i]!.maxTokens);
  }
});

for (const overlap of [true, false]) {
  test(`overlapDispatch ${overlap ? 'on' : 'off'}: when a step's tokens reach the sink, relative to the next step's runner call`, async () => {
    const runner = new MockRunner({ cost: { speed: 0 } });
    const events: string[] = [];
    let step = 0;
    const execute = runner.execute.bind(runner);
    runner.execute = async (plan): Promise<StepResult> => {
      const k = step++;
      events.push(`start ${k}`);
      // The runner's compute runs off the main thread: the engine goes on until this resolves.
      await new Promise((r) => setImmediate(r));
      const result = await execute(plan);
      events.push(`end ${k}`);
      return result;
    };
    const e = engine(overlap, runner);
    e.start();
    const out: Outcome[] = [];
    const req = makeRequest(e, { prompt: 'one stream', maxTokens: 5 }, 'r', out);
    let delivered = 0;
    e.submit(req, (ev) => {
      delivered += ev.newTokenIds.length;
      events.push(`tokens ${delivered}${ev.finishReason === null ? '' : ' finished'}`);
    });
    await e.whenIdle();
    await e.stop();
    // Step 0 prefills and samples the first token; steps 1..4 decode one each; step 5 only frees
    // the finished sequence's cells (a KV operation).
    const expected = overlap
      ? ['start 0', 'end 0', 'start 1', 'tokens 1', 'end 1', 'start 2', 'tokens 2', 'end 2', 'start 3', 'tokens 3', 'end 3', 'start 4', 'tokens 4', 'end 4', 'start 5', 'tokens 5 finished', 'end 5']
      : ['start 0', 'end 0', 'tokens 1', 'start 1', 'end 1', 'tokens 2', 'start 2', 'end 2', 'tokens 3', 'start 3', 'end 3', 'tokens 4', 'start 4', 'end 4', 'tokens 5 finished', 'start 5', 'end 5'];
    assert.deepEqual(events, expected);
  });
}

test('the event loop gets a turn between steps even when the runner answers at once', async () => {
  // A runner that answers without waiting, as a step run on the JS thread (inlineStepMs) does: the
  // loop must still let timers and sockets in between steps, not run a generation in microtasks.
  const mock = new MockRunner({ cost: { speed: 0 } });
  const runner = Object.assign(Object.create(mock) as MockRunner, {
    execute: (p: RunnerPlan): Promise<StepResult> => Promise.resolve({ ok: true, sampled: p.items.map((it) => (it.sample ? 7 : null)), computeMs: 0 }),
  });
  const e = engine(false, runner);
  e.start();
  const out: Outcome[] = [];
  const req = makeRequest(e, { prompt: 'a long answer', maxTokens: 200 }, 'long', out);
  let tokensAtTimer = -1;
  e.submit(req, sinkFor(req));
  setTimeout(() => (tokensAtTimer = out[0]!.tokens.length), 0);
  await e.whenIdle();
  await e.stop();
  assert.equal(out[0]!.tokens.length, 200);
  assert.ok(tokensAtTimer >= 0 && tokensAtTimer < 200, `a 0 ms timer fired after ${tokensAtTimer} of 200 tokens`);
});

test('the engine tells the runner it is idle when its loop goes to sleep, never between a request\'s steps', async () => {
  const runner = new MockRunner({ cost: { speed: 0 } });
  const events: string[] = [];
  const execute = runner.execute.bind(runner);
  runner.execute = (plan): Promise<StepResult> => {
    events.push(plan.items.length > 0 ? 'step' : 'kv');
    return execute(plan);
  };
  Object.assign(runner, { idle: () => events.push('idle') });
  const e = engine(false, runner);
  e.start();
  for (const name of ['a', 'b']) {
    const out: Outcome[] = [];
    e.submit(makeRequest(e, { prompt: `request ${name}`, maxTokens: 4 }, name, out), () => {});
    await e.whenIdle();
    await new Promise((r) => setImmediate(r));
  }
  await e.stop();
  // Per request: a prefill and 3 decode steps, the step that frees its cells, then the loop sleeps.
  const perRequest = ['step', 'step', 'step', 'step', 'kv', 'idle'];
  assert.deepEqual(events.slice(events.indexOf('step')), [...perRequest, ...perRequest]);
});
