// KV allocation under pressure (issue 9, "Make room"): mixed prompt sizes must not evict each other
// forever, and the prefix cache counts one lookup per request however often it is retried.
// Driven step by step (schedule → mock runner → update), with the invariant check after every step;
// the property test at the end fails if its runs never reached the states it is about.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { RequestStatus } from '../../../src/engine/request.ts';
import { MockRunner } from '../../../src/engine/runner/mock/mock-runner.ts';
import { createScheduler } from '../../../src/engine/scheduler/factory.ts';
import type { SchedulerConfig } from '../../../src/engine/scheduler/factory.ts';
import type { BatchScheduler } from '../../../src/engine/scheduler/batch-scheduler.ts';
import type { Scheduler } from '../../../src/engine/scheduler/scheduler.ts';
import { makeRequest, stepOnce } from '../../helpers/engine-driver.ts';
import type { Outcome } from '../../helpers/engine-driver.ts';
import { Coverage, prng, propertyParams } from '../kv/property-support.ts';

/** A unique prompt of `n` tokens (word-piece ids, so nothing is shared between prompts by accident). */
const uniquePrompt = (k: number, n: number): number[] => [1, ...Array.from({ length: n - 1 }, (_, i) => 259 + ((k * 7919 + i * 31 + ((i * i) % 13)) % 150))];

interface Arrival { readonly atStep: number; readonly prompt: number[]; readonly maxTokens: number }

async function drive(runner: MockRunner, config: SchedulerConfig, arrivals: readonly Arrival[], maxSteps = 20_000): Promise<{ s: Scheduler; out: Outcome[]; steps: number }> {
  const s = createScheduler({ maxOutputTokens: 64, ...config }, runner.info);
  const out: Outcome[] = [];
  const pending = [...arrivals];
  let step = 0;
  for (; step < maxSteps && (pending.length > 0 || s.numUnfinished > 0); step++) {
    while (pending.length > 0 && pending[0]!.atStep <= step) {
      const a = pending.shift()!;
      const engineLike = { runner, now: () => step } as unknown as Parameters<typeof makeRequest>[0];
      s.add(makeRequest(engineLike, { prompt: a.prompt, maxTokens: a.maxTokens }, `r${out.length}`, out));
    }
    await stepOnce(s, runner, step);
  }
  return { s, out, steps: step };
}

test('mixed prompt sizes under overload do not thrash: a prompt starts only when all of it fits', async () => {
  // The mixed workload scaled down: 1,024 cells (64 blocks), prompts of 64 / 256 / 896 tokens
  // (1:1:1), a 64-token prompt chunk per step, arrivals faster than the pool drains them.
  const sizes = [64, 256, 896];
  const arrivals: Arrival[] = Array.from({ length: 36 }, (_, i) => ({ atStep: 4 * i, prompt: uniquePrompt(i, sizes[i % 3]!), maxTokens: 24 }));
  const runner = new MockRunner({ cost: { speed: 0 }, contextTokens: 1024, maxSequences: 8, maxBatchTokens: 128 });
  const { s, out, steps } = await drive(runner, { scheduler: 'continuous', prefillChunkTokens: 64 }, arrivals);
  const snap = s.snapshot();
  assert.equal(s.numUnfinished, 0, `not drained after ${steps} steps (${snap.numPreemptions} preemptions)`);
  assert.ok(out.every((o) => o.reason === 'length'), 'every request completed');
  const perRequest = snap.numPreemptions / out.length;
  console.log(`# ${snap.numPreemptions} preemptions for ${out.length} requests in ${steps} steps`);
  assert.ok(perRequest < 0.2, `${snap.numPreemptions} preemptions for ${out.length} requests (${perRequest.toFixed(2)} each)`);
});

test('prefix-cache queries count once per request while it waits at the head of the line', async () => {
  // 256 cells (16 blocks): A (200 tokens, 13 blocks) runs; B (100 tokens, 7 blocks) waits for it step after step.
  const runner = new MockRunner({ cost: { speed: 0 }, contextTokens: 256, maxSequences: 4, maxBatchTokens: 256 });
  const a = uniquePrompt(1, 200);
  const b = uniquePrompt(2, 100);
  const { s, out } = await drive(runner, { scheduler: 'continuous' }, [{ atStep: 0, prompt: a, maxTokens: 30 }, { atStep: 1, prompt: b, maxTokens: 4 }]);
  assert.ok(out.every((o) => o.reason === 'length'));
  assert.ok(out[1]!.request.scheduledMs! > 5, 'B waited several steps (the retries this test is about)');
  const kv = s.snapshot().kv.prefixCache!;
  assert.equal(kv.queryTokens, a.length - 1 + b.length - 1, 'one lookup per request (the last prompt token is never looked up)');
});

test('prefix-cache queries count once per request across preemptions', async () => {
  // 256 cells (16 blocks): four 40-token prompts (3 blocks each) all start, then grow to 100 tokens
  // (7 blocks each): decode growth must preempt, and the preempted restart with a longer sequence.
  const runner = new MockRunner({ cost: { speed: 0 }, contextTokens: 256, maxSequences: 8, maxBatchTokens: 256 });
  const prompts = [0, 1, 2, 3].map((k) => uniquePrompt(10 + k, 40));
  const { s, out } = await drive(runner, { scheduler: 'continuous' }, prompts.map((prompt) => ({ atStep: 0, prompt, maxTokens: 60 })));
  const snap = s.snapshot();
  assert.ok(out.every((o) => o.reason === 'length'));
  assert.ok(snap.numPreemptions > 0, 'the setting must preempt for the test to mean anything');
  assert.equal(snap.kv.prefixCache!.queryTokens, prompts.reduce((n, p) => n + p.length - 1, 0));
});

test('a request whose prompt shares one block with a long cached prompt still starts (its hit pins only that block)', async () => {
  // 256 cells (16 blocks): A's 200-token prompt stays cached as one 12-block node after it ends;
  // B shares A's first block and needs 15 blocks, so it must evict the rest of A's node.
  const runner = new MockRunner({ cost: { speed: 0 }, contextTokens: 256, maxSequences: 4, maxBatchTokens: 256 });
  const a = uniquePrompt(1, 200);
  const b = [...a.slice(0, 16), ...uniquePrompt(2, 224).slice(16)];
  const { out } = await drive(runner, { scheduler: 'continuous', cacheRetain: 'all' }, [{ atStep: 0, prompt: a, maxTokens: 4 }, { atStep: 20, prompt: b, maxTokens: 4 }], 200);
  assert.deepEqual(out.map((o) => o.reason), ['length', 'length'], 'B never started: its own pinned hit kept the blocks it needed');
  assert.equal(out[1]!.request.numCachedTokens, 16);
});

const STATES = ['stopped: none_waiting', 'stopped: no_blocks', 'stopped: no_seq_id', 'stopped: budget', 'stopped: max_running', 'started beside others', 'preempted', 'finished at the preemption cap', 'never fits', 'peek hit', 'prefix hit', 'host hit'];

test('property: random mixed workloads keep the allocation rule, the watermark and the preemption cap; peek is pure; nothing stalls', async () => {
  const coverage = new Coverage(STATES);
  const run = fc.record({
    numCells: fc.constantFrom(256, 512, 1024),
    // Few sequence ids make a step stop on them (cached prefixes hold ids too): drawn more often.
    maxSequences: fc.constantFrom(2, 2, 3, 3, 4, 6, 8),
    prefillChunkTokens: fc.constantFrom(16, 64, 128),
    kvWatermark: fc.constantFrom(0, 0.01, 0.05),
    maxPreemptions: fc.integer({ min: 0, max: 2 }),
    prefixCache: fc.boolean(),
    hostTierTokens: fc.constantFrom(0, 0, 256, 2048),
    cacheMaxFraction: fc.constantFrom(1, 1, 0.25, 0),
    seed: fc.integer({ min: 1, max: 1_000_000 }),
  });
  await fc.assert(
    fc.asyncProperty(run, async (p) => {
      coverage.startRun();
      const rand = prng(p.seed);
      const pick = (n: number): number => Math.floor(rand() * n);
      const runner = new MockRunner({ cost: { speed: 0 }, contextTokens: p.numCells, maxSequences: p.maxSequences, maxBatchTokens: 128 });
      const config: SchedulerConfig = { scheduler: 'continuous', maxOutputTokens: 64, prefillChunkTokens: p.prefillChunkTokens, kvWatermark: p.kvWatermark, maxPreemptions: p.maxPreemptions, prefixCache: p.prefixCache, hostTierTokens: p.hostTierTokens, cacheMaxFraction: p.cacheMaxFraction };
      const s = createScheduler(config, runner.info) as BatchScheduler;
      const watermark = Math.ceil(p.kvWatermark * (p.numCells / 16));
      const bases = [uniquePrompt(p.seed, 200), uniquePrompt(p.seed + 1, 100)];
      const out: Outcome[] = [];
      const prompts: number[][] = [];
      let numArrived = 0;
      for (let step = 0; step < 5000 && (numArrived < 20 || s.numUnfinished > 0); step++) {
        if (numArrived < 20 && pick(4) === 0) {
          const big = pick(40) === 0;
          const maxTokens = 1 + pick(48);
          const len = big ? p.numCells + 16 : 2 + pick(Math.floor(0.9 * p.numCells) - maxTokens);
          const base = bases[pick(2)]!;
          const prompt = pick(2) === 0 ? [...base.slice(0, Math.min(len - 1, base.length)), ...uniquePrompt(numArrived + 7, len).slice(Math.min(len - 1, base.length))] : uniquePrompt(p.seed + 10 + numArrived, len);
          prompts.push(prompt);
          const engineLike = { runner, now: () => step } as unknown as Parameters<typeof makeRequest>[0];
          s.add(makeRequest(engineLike, { prompt, maxTokens }, `r${numArrived++}`, out));
        }
        if (pick(30) === 0 && out.length > 0) {
          const victim = out[pick(out.length)]!;
          if (victim.reason === null) s.abort(victim.request);
        }
        // peek is pure: the whole snapshot is unchanged by it.
        const probe = prompts[pick(prompts.length)];
        if (probe !== undefined) {
          const before = JSON.stringify(s.snapshot());
          if (s.peekCachedTokens(probe) > 0) coverage.hit('peek hit');
          assert.equal(JSON.stringify(s.snapshot()), before, 'peek changed the scheduler or its cache');
        }
        const runningBefore = new Set(out.filter((o) => o.request.status === RequestStatus.RUNNING).map((o) => o.request));
        await stepOnce(s, runner, step, (plan) => {
          coverage.op();
          const snap = s.snapshot();
          coverage.hit(`stopped: ${snap.stopReason}`);
          const started = out.filter((o) => o.request.status === RequestStatus.RUNNING && !runningBefore.has(o.request));
          const others = [...runningBefore].filter((r) => r.status === RequestStatus.RUNNING).length;
          if (started.length > 0 && others + started.length > 1) {
            coverage.hit('started beside others');
            // Only decode-first growth ran before the starts, so the watermark is still free now.
            assert.ok(snap.numFreeBlocks >= watermark, `a request started beside others leaving ${snap.numFreeBlocks} free blocks, watermark ${watermark}`);
          }
          if (plan.runner.items.length === 0 && plan.runner.kvOps.length === 0 && s.numUnfinished > 0) assert.fail(`stalled at step ${step}: ${JSON.stringify(snap)}`);
        });
        for (const o of out) {
          assert.ok(o.request.numPreemptions <= p.maxPreemptions + s.numForcedPreemptions, `request ${o.request.id} preempted ${o.request.numPreemptions} times, cap ${p.maxPreemptions}`);
          if (o.request.numPreemptions > 0) coverage.hit('preempted');
        }
      }
      assert.equal(s.numUnfinished, 0, 'not drained');
      assert.equal(s.numRunnerRefusals, 0, 'the runner refused a batch the accounting admitted');
      for (const o of out) {
        if (o.reason === 'error') coverage.hit('never fits');
        if (o.request.numPreemptions === p.maxPreemptions && p.maxPreemptions > 0 && o.reason === 'length') coverage.hit('finished at the preemption cap');
        if (o.request.numCachedTokens > 0) coverage.hit('prefix hit');
        if ((s.snapshot().kv.prefixCache?.host?.numLoads ?? 0) > 0) coverage.hit('host hit');
        if (o.reason === 'error') assert.ok(o.request.numPromptTokens > p.numCells, `request ${o.request.id} of ${o.request.numPromptTokens} tokens ended with an error`);
      }
      coverage.endRun();
    }),
    // One run known to stop on sequence ids, so reaching that state does not rest on the draw alone;
    // one where a lone request that computed a cached prefix a second time had to fit in 256 cells.
    {
      ...propertyParams(60),
      examples: [
        [{ numCells: 512, maxSequences: 2, prefillChunkTokens: 64, kvWatermark: 0, maxPreemptions: 0, prefixCache: true, hostTierTokens: 0, cacheMaxFraction: 1, seed: 555377 }],
        [{ numCells: 256, maxSequences: 2, prefillChunkTokens: 16, kvWatermark: 0, maxPreemptions: 0, prefixCache: true, hostTierTokens: 0, cacheMaxFraction: 1, seed: 334642 }],
      ],
    },
  );
  coverage.reportAndAssert('scheduler KV allocation', 5000);
});

test('a hit copies each cached node from its own owner: a prefix two requests computed at once is not taken from the duplicate', async () => {
  // A (64 tokens) and B (80) share 48 and are prefilled in the same step, so both compute those 48.
  // A inserts first and owns [0, 64); B's insert hangs its [48, 80) under A's [0, 48), and B's own
  // cells for [0, 48) are duplicates the accounting does not count. C then hits [0, 80): the cells
  // for [0, 48) must come from A (whose blocks the accounting shares), [48, 80) from B.
  const runner = new MockRunner({ cost: { speed: 0 }, contextTokens: 512, maxSequences: 4, maxBatchTokens: 256 });
  const s = createScheduler({ scheduler: 'continuous', maxOutputTokens: 64, prefillChunkTokens: 256, cacheRetain: 'all' }, runner.info) as BatchScheduler;
  const shared = uniquePrompt(1, 48);
  const a = [...shared, ...uniquePrompt(2, 17).slice(1)];
  const b = [...shared, ...uniquePrompt(3, 33).slice(1)];
  const c = [...b, ...uniquePrompt(4, 17).slice(1)];
  const out: Outcome[] = [];
  const engineLike = (t: number) => ({ runner, now: () => t }) as unknown as Parameters<typeof makeRequest>[0];
  s.add(makeRequest(engineLike(0), { prompt: a, maxTokens: 20 }, 'A', out));
  s.add(makeRequest(engineLike(0), { prompt: b, maxTokens: 20 }, 'B', out));
  const first = await stepOnce(s, runner, 0);
  assert.deepEqual(first.scheduled.map((x) => [x.request.id, x.numNewTokens]), [['A', 64], ['B', 80]], 'both prompts whole in one step');
  const seqOf = (id: string): number => first.scheduled.find((x) => x.request.id === id)!.request.seqId!;
  const seqA = seqOf('A');
  const seqB = seqOf('B');
  s.add(makeRequest(engineLike(1), { prompt: c, maxTokens: 4 }, 'C', out));
  const withC = await stepOnce(s, runner, 1);
  const copies = withC.runner.kvOps.filter((op) => op.kind === 'copy');
  assert.deepEqual(
    copies.map((op) => (op.kind === 'copy' ? [op.srcSeqId, op.p0, op.p1] : [])),
    [
      [seqA, 0, 48],
      [seqB, 48, 80],
    ],
  );
  for (let t = 2; s.numUnfinished > 0 && t < 500; t++) await stepOnce(s, runner, t);
  assert.equal(s.numRunnerRefusals, 0);
});

test('a prefix two requests computed at once is shared afterwards: the second adopts the cache\'s blocks, so alone it fits a small pool', async () => {
  // 256 cells (16 blocks of 16). A and B share 96 tokens and are prefilled in the same step, so both
  // compute them; A's insert comes first and the cache keeps A's copy. B then grows to 112 + 100
  // tokens (14 blocks). Holding its own copy of the 6 shared blocks beside the cache's (which its
  // pin keeps), it would need 20, and once A had finished it ended with an error although it fits
  // the pool alone (the property test's seed 334642 found this).
  const runner = new MockRunner({ cost: { speed: 0 }, contextTokens: 256, maxSequences: 2, maxBatchTokens: 512 });
  const s = createScheduler({ scheduler: 'continuous', maxOutputTokens: 128, prefillChunkTokens: 512, kvWatermark: 0, maxPreemptions: 0, cacheRetain: 'all' }, runner.info) as BatchScheduler;
  const shared = uniquePrompt(11, 96);
  const a = [...shared, ...uniquePrompt(12, 17).slice(1)];
  const b = [...shared, ...uniquePrompt(13, 17).slice(1)];
  const out: Outcome[] = [];
  const engineLike = { runner, now: () => 0 } as unknown as Parameters<typeof makeRequest>[0];
  s.add(makeRequest(engineLike, { prompt: a, maxTokens: 1 }, 'A', out));
  s.add(makeRequest(engineLike, { prompt: b, maxTokens: 100 }, 'B', out));
  const first = await stepOnce(s, runner, 0);
  assert.deepEqual(first.scheduled.map((x) => [x.request.id, x.numNewTokens]), [['A', 112], ['B', 112]], 'both prompts whole in one step');
  // A finishes in that step (one token) and gives its seqId field back; the plan kept it.
  const [seqA, seqB] = first.runner.items.map((item) => item.seqId);
  const second = await stepOnce(s, runner, 1);
  assert.deepEqual(
    second.runner.kvOps.filter((op) => op.kind === 'adopt'),
    [{ kind: 'adopt', srcSeqId: seqA, dstSeqId: seqB, p0: 0, p1: 96 }],
    'B takes A\'s cells for the shared blocks (the mock checks they hold the same KV)',
  );
  assert.equal(s.snapshot().kv.prefixCache?.adoptedBlocks, 6, '/stats counts them');
  for (let t = 2; s.numUnfinished > 0 && t < 500; t++) await stepOnce(s, runner, t);
  assert.deepEqual(out.map((o) => [o.request.id, o.reason, o.tokens.length]), [['A', 'length', 1], ['B', 'length', 100]]);
  assert.equal(s.numRunnerRefusals, 0);
});
