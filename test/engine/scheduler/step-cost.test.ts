// The step-time budget: its online cost model, the chunk sizes it gives, and (through the mock
// runner's attention-cost term) that it keeps steps with decoding requests at their target time
// while a long prompt prefills, where the fixed chunk lets them grow with the prompt's depth.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { StepBudget, StepCostModel } from '../../../src/engine/scheduler/step-cost.ts';
import type { StepShape } from '../../../src/engine/scheduler/step-cost.ts';
import { MockRunner } from '../../../src/engine/runner/mock/mock-runner.ts';
import { createScheduler } from '../../../src/engine/scheduler/factory.ts';
import type { BatchScheduler } from '../../../src/engine/scheduler/batch-scheduler.ts';
import { alignedPromptBudget } from '../../../src/engine/scheduler/batch-scheduler.ts';
import { makeRequest, stepOnce } from '../../helpers/engine-driver.ts';
import type { Outcome } from '../../helpers/engine-driver.ts';

/** The synthetic machine: own-context attention and a cheaper walk over the rest of the pool. */
const truthS = (s: StepShape): number => 2 + 0.5 * s.decodeRows + 0.3 * s.promptRows + (0.1 * s.ownCells) / 1000 + (0.03 * (s.decodeRows + s.promptRows) * s.poolCells) / 1000;
/** A step whose rows sit at position ctx on average, in a pool of kv cells. */
const sh = (d: number, p: number, kv: number, ctx = kv / 2): StepShape => ({ decodeRows: d, promptRows: p, ownCells: (d + p) * ctx, poolCells: kv });
const truth = (d: number, p: number, kv: number, ctx = kv / 2): number => truthS(sh(d, p, kv, ctx));

/** A deterministic stream of steps of varied size and depth with ±noise relative error. */
function steps(seed: number, n: number, noise: number): [StepShape, number][] {
  let st = seed >>> 0 || 1;
  const u = (): number => {
    st = (Math.imul(st, 1103515245) + 12345) >>> 0;
    return st / 2 ** 32;
  };
  return Array.from({ length: n }, () => {
    const d = Math.floor(u() * 16);
    const p = u() < 0.5 ? 0 : 1 + Math.floor(u() * 512);
    const dd = d + p === 0 ? 1 : d;
    const kv = Math.floor(u() * 8192);
    const shape = sh(dd, p, kv, u() * kv);
    return [shape, truthS(shape) * (1 + (2 * u() - 1) * noise)];
  });
}

test('the cost model recovers the step-cost terms from noisy steps of varied size and depth', () => {
  fc.assert(
    fc.property(fc.integer({ min: 1, max: 2 ** 31 - 1 }), fc.double({ min: 0, max: 0.1, noNaN: true }), (seed, noise) => {
      const m = new StepCostModel();
      for (const [shape, ms] of steps(seed, 300, noise)) m.observe(shape, ms);
      for (const [d, p, kv] of [[1, 0, 100], [0, 256, 0], [2, 64, 6000], [8, 512, 4000]] as const) {
        // Relative to the size of steps the budget plans (≥ 20 ms): a few-ms step's error is the big steps' noise.
        const rel = Math.abs(m.predict(sh(d, p, kv)) - truth(d, p, kv)) / Math.max(20, truth(d, p, kv));
        assert.ok(rel < 0.1 + noise, `predict(${d}, ${p}, ${kv}) = ${m.predict(sh(d, p, kv))} vs ${truth(d, p, kv)}`);
      }
    }),
    { numRuns: 50, seed: 11 },
  );
});

test('a long run of identical steps does not wind the model up: a few odd steps afterwards move it by their noise, not more', () => {
  const m = new StepCostModel();
  for (const [shape, ms] of steps(5, 300, 0)) m.observe(shape, ms);
  for (let i = 0; i < 5000; i++) m.observe(sh(8, 0, 3000), truth(8, 0, 3000));
  m.observe(sh(2, 400, 500), truth(2, 400, 500) * 1.1);
  m.observe(sh(3, 380, 700), truth(3, 380, 700) * 0.9);
  m.observe(sh(1, 30, 6000), truth(1, 30, 6000) * 1.1);
  for (const [d, p, kv] of [[1, 0, 100], [0, 256, 0], [2, 64, 6000]] as const) {
    const rel = Math.abs(m.predict(sh(d, p, kv)) - truth(d, p, kv)) / Math.max(10, truth(d, p, kv));
    assert.ok(rel < 0.15, `predict(${d}, ${p}, ${kv}) = ${m.predict(sh(d, p, kv))} vs ${truth(d, p, kv)}`);
  }
});

test('the cost model follows a machine that slows down three-fold once its kinds of steps recur', () => {
  const m = new StepCostModel();
  let i = 0;
  const step = (scale: number): void => {
    const d = 1 + (i % 7);
    const p = i % 3 === 0 ? 0 : (i * 37) % 300;
    const kv = (i * 997) % 7000;
    const ctx = (i * 113) % (kv + 1);
    m.observe(sh(d, p, kv, ctx), scale * truth(d, p, kv, ctx));
    i++;
  };
  for (let k = 0; k < 200; k++) step(1);
  assert.ok(Math.abs(m.predict(sh(2, 100, 2000)) / truth(2, 100, 2000) - 1) < 0.05);
  // Each bin keeps its last few steps, so the model has moved once steps of each kind have recurred a few times.
  for (let k = 0; k < 3000; k++) step(3);
  assert.ok(Math.abs(m.predict(sh(2, 100, 2000)) / (3 * truth(2, 100, 2000)) - 1) < 0.05, `after the slowdown: ${m.predict(sh(2, 100, 2000))} vs ${3 * truth(2, 100, 2000)}`);
});

/**
 * A machine shaped like the measured one (bench/native/chunk-cost.ts): a decode-only step, and what a
 * prompt chunk adds to it: a fixed part for a mixed step, each row's matmuls and its attention,
 * cheaper per row at 64 rows a step and up, where llama.cpp tiles attention.
 */
const decodeMs = (d: number): number => 2 + 0.4 * d;
const chunkAddMs = (d: number, n: number, pos: number): number => {
  if (n === 0) return 0;
  const tiled = d + n >= 64;
  return 1.5 + n * ((tiled ? 0.25 : 0.3) + ((tiled ? 0.4 : 0.6) * (pos + (n + 1) / 2)) / 1000);
};

interface ChunkStep {
  readonly n: number;
  readonly pos: number;
  /** What the chunk truly added (noise-free). */
  readonly addMs: number;
}

/** Drives a budget as the scheduler does: d decode rows beside one prompt of `tokens`, chunk by chunk, steps timed with ±noise. */
function prefillBeside(b: StepBudget, d: number, tokens: number, noise = 0.05, seed = 7, within?: Parameters<StepBudget['prefillTokens']>[2]): ChunkStep[] {
  let st = seed;
  const u = (): number => ((st = (Math.imul(st, 1103515245) + 12345) >>> 0), st / 2 ** 32);
  const ctx = 100 * d;
  for (let i = 0; i < 10; i++) b.observe({ decodeRows: d, promptRows: 0, ownCells: ctx, promptCells: 0, poolCells: ctx }, decodeMs(d) * (1 + noise * (2 * u() - 1)));
  const steps: ChunkStep[] = [];
  for (let pos = 0; pos < tokens; ) {
    const n = Math.min(alignedPromptBudget(d, b.prefillTokens(d, pos, within)), tokens - pos);
    const promptCells = n * pos + (n * (n + 1)) / 2;
    const ms = (decodeMs(d) + chunkAddMs(d, n, pos)) * (1 + noise * (2 * u() - 1));
    b.observe({ decodeRows: d, promptRows: n, ownCells: ctx + d + promptCells, promptCells, poolCells: ctx + pos + d + n }, ms);
    steps.push({ n, pos, addMs: chunkAddMs(d, n, pos) });
    pos += n;
  }
  return steps;
}

function warmBudget(opts: Partial<ConstructorParameters<typeof StepBudget>[0]> = {}): StepBudget {
  const b = new StepBudget({ baseChunkTokens: 256, maxChunkTokens: 2048, ...opts });
  prefillBeside(b, 2, 3000);
  return b;
}

test('budget: the static chunk until warm, the whole token budget with nothing decoding', () => {
  const cold = new StepBudget({ baseChunkTokens: 256, maxChunkTokens: 2048 });
  assert.equal(cold.prefillTokens(3, 1000), 256);
  assert.equal(cold.targetMs(), null);
  assert.equal(cold.prefillTokens(0, 1000), 2048);
  // Decode-only steps, however many, say nothing about a chunk's cost: still the static chunk.
  const decodeOnly = new StepBudget({ baseChunkTokens: 256, maxChunkTokens: 2048 });
  for (let i = 0; i < 100; i++) decodeOnly.observe(sh(1 + (i % 4), 0, 100 + i), truth(1 + (i % 4), 0, 100 + i));
  assert.equal(decodeOnly.warm, false);
  assert.equal(decodeOnly.prefillTokens(1, 0), 256);
  const warm = warmBudget();
  assert.equal(warm.warm, true);
  assert.equal(warm.prefillTokens(0, 0), 2048);
  assert.ok(warm.prefillTokens(1, 0) <= 256, 'with decode rows and the derived target, never above the base chunk');
  // A fixed target trusts nothing it has not measured: before a mixed step, the floor, not a base chunk.
  assert.equal(new StepBudget({ baseChunkTokens: 256, maxChunkTokens: 2048, minChunkTokens: 1, targetMs: 6 }).prefillTokens(1, 0), 1);
});

test('budget: with decode rows and the derived target, each chunk adds about the target and shrinks as the prompt deepens', () => {
  const b = new StepBudget({ baseChunkTokens: 256, maxChunkTokens: 2048 });
  const warmup = prefillBeside(b, 2, 3000);
  const target = b.targetMs()!;
  // The default target: twice what a base chunk adds to a step at the start of a prompt.
  const base = chunkAddMs(0, 256, 0);
  assert.ok(Math.abs(target / (2 * base) - 1) < 0.1, `target ${target} vs ${2 * base}`);
  assert.ok(warmup.length > 10);
  const steps = prefillBeside(b, 2, 8000, 0.05, 11);
  // Over the target only at the 64-row floor (decode rows included), deep in the prompt.
  for (const s of steps) assert.ok(s.addMs <= target * 1.1 || s.n <= 64, `position ${s.pos}: a ${s.n}-row chunk adds ${s.addMs.toFixed(1)} ms > target ${target.toFixed(1)}`);
  assert.ok(steps.some((s) => s.n <= 64), 'the prompt is deep enough to reach the floor');
  const early = steps.filter((s) => s.pos < 1000);
  const deep = steps.filter((s) => s.pos > 6000 && s.pos + s.n < 8000);
  assert.ok(early.every((s) => s.n >= 250), `near the start the base chunk fits: ${early.map((s) => s.n).join(',')}`);
  assert.ok(deep.every((s) => s.n < 160 && s.addMs > target * 0.8), `deep chunks shrink and still use the target: ${deep.map((s) => `${s.n}:${s.addMs.toFixed(0)}`).join(',')}`);
});

test('budget: a tight fixed target sizes chunks below 64 rows when the floor allows, within the target through a 6,000-token prompt', () => {
  const b = new StepBudget({ baseChunkTokens: 256, maxChunkTokens: 2048, minChunkTokens: 1, targetMs: 6 });
  const steps = prefillBeside(b, 1, 6000);
  // From the first mixed step on, nothing it added went more than 15% over the target (the fit's first steps included).
  const over = steps.filter((s) => s.addMs > 6 * 1.15);
  assert.ok(over.length <= 2 && over.every((s) => s.pos < 100), `over the target: ${over.map((s) => `${s.n}@${s.pos}:${s.addMs.toFixed(1)}`).join(',')}`);
  const median = (xs: number[]): number => [...xs].sort((x, y) => x - y)[xs.length >> 1]!;
  assert.ok(median(steps.map((s) => s.addMs)) > 6 * 0.6, 'the target is used, not wasted on 1-row chunks');
  const meanN = (xs: ChunkStep[]): number => xs.reduce((t, s) => t + s.n, 0) / xs.length;
  assert.ok(meanN(steps.filter((s) => s.pos < 500)) > 3 * meanN(steps.filter((s) => s.pos > 5000)), 'chunks shrink with depth');
  assert.ok(steps.filter((s) => s.pos > 5000).every((s) => s.n <= 2));
});

test('budget: a fixed target, the minimum chunk floor, growth past what was measured, and a nonsensical fit', () => {
  const fixed = warmBudget({ targetMs: 60 });
  prefillBeside(fixed, 1, 2000);
  const n = fixed.prefillTokens(1, 1000);
  assert.ok(n >= 64 && chunkAddMs(1, n, 1000) <= 60 * 1.06 && chunkAddMs(1, n + 8, 1000) > 60 * 0.94, `chunk ${n} adds ${chunkAddMs(1, n, 1000)}`);
  assert.equal(warmBudget({ targetMs: 1 }).prefillTokens(1, 1000), 64, 'a target below one minimum chunk still makes progress');
  // Two small steps that cost the same say nothing of a big one: the chunk grows at most two-fold.
  const young = new StepBudget({ baseChunkTokens: 256, maxChunkTokens: 2048, minChunkTokens: 1, targetMs: 6 });
  for (let i = 0; i < 8; i++) young.observe({ decodeRows: 1, promptRows: 0, ownCells: 70, promptCells: 0, poolCells: 70 }, 2);
  young.observe({ decodeRows: 1, promptRows: 1, ownCells: 71, promptCells: 1, poolCells: 72 }, 3.4);
  young.observe({ decodeRows: 1, promptRows: 2, ownCells: 74, promptCells: 3, poolCells: 74 }, 3.4);
  assert.ok(young.prefillTokens(1, 3) <= 4, `after 1- and 2-row steps: ${young.prefillTokens(1, 3)}`);
  // Mixed steps measured faster than decode alone: no cost a row to size by, the static chunk.
  const odd = new StepBudget({ baseChunkTokens: 256, maxChunkTokens: 2048 });
  for (let i = 0; i < 10; i++) odd.observe({ decodeRows: 2, promptRows: 0, ownCells: 200, promptCells: 0, poolCells: 200 }, 50);
  for (let i = 0; i < 40; i++) odd.observe({ decodeRows: 2, promptRows: 10 + i * 10, ownCells: 200, promptCells: (10 + i * 10) * i * 10, poolCells: 1000 }, 40 - i * 0.5);
  assert.equal(odd.prefillTokens(2, 0), 256);
  // Bigger chunks measured cheaper (adds 30 ms falling to 10.5 as chunks grow): a fixed cost a step and
  // no cost a row is nothing to size by either: the static chunk, or the floor under a fixed target.
  for (const [opts, expected] of [[{}, 256], [{ minChunkTokens: 1, targetMs: 30 }, 1]] as const) {
    const flat = new StepBudget({ baseChunkTokens: 256, maxChunkTokens: 2048, ...opts });
    for (let i = 0; i < 10; i++) flat.observe({ decodeRows: 2, promptRows: 0, ownCells: 200, promptCells: 0, poolCells: 200 }, 10);
    for (let i = 0; i < 40; i++) flat.observe({ decodeRows: 2, promptRows: 10 + i * 10, ownCells: 200, promptCells: (10 + i * 10) * i * 10, poolCells: 1000 }, 40 - i * 0.5);
    assert.equal(flat.prefillTokens(2, 0), expected, JSON.stringify(flat.chunks.lines()));
  }
});

test('budget: a TPOT cap holds the whole step within it, down to one row a step, and never raises a chunk above the base', () => {
  // Sizing off (the default), a stream with a 9 ms TPOT beside a 6,000-token prompt.
  const b = new StepBudget({ baseChunkTokens: 256, maxChunkTokens: 2048 });
  assert.equal(b.prefillTokens(1, 0, { target: false, stepCapMs: 9 }), 1, 'no decode-only step timed yet: one row');
  const steps = prefillBeside(b, 1, 6000, 0.05, 7, { target: false, stepCapMs: 9 });
  const over = steps.filter((s) => decodeMs(1) + s.addMs > 9 * 1.15);
  assert.ok(over.length <= 2, `steps over the cap: ${over.map((s) => `${s.n}@${s.pos}:${(decodeMs(1) + s.addMs).toFixed(1)}`).join(',')}`);
  assert.ok(steps.filter((s) => s.pos > 5000).every((s) => s.n === 1), `deep in the prompt, one row a step: ${steps.filter((s) => s.pos > 5000).map((s) => s.n).join(',')}`);
  // A loose cap leaves the --prefill-chunk cap as it was.
  const loose = new StepBudget({ baseChunkTokens: 256, maxChunkTokens: 2048 });
  const looseSteps = prefillBeside(loose, 1, 3000, 0.05, 7, { target: false, stepCapMs: 10_000 });
  assert.ok(looseSteps.every((s) => s.n <= 256) && looseSteps.some((s) => s.n >= 250), `loose: ${looseSteps.map((s) => s.n).join(',')}`);
  // With a target as well, the tighter of the two.
  const both = new StepBudget({ baseChunkTokens: 256, maxChunkTokens: 2048, minChunkTokens: 1, targetMs: 30 });
  prefillBeside(both, 1, 3000);
  const n = both.prefillTokens(1, 2000, { stepCapMs: 9 });
  assert.ok(n >= 1 && decodeMs(1) + chunkAddMs(1, n, 2000) <= 9 * 1.1 && n < both.prefillTokens(1, 2000), `chunk ${n}`);
});

/** A 40-token-prompt stream decodes while a ~6,000-token prompt prefills; the step times of steps carrying the stream. */
async function streamStepsDuringLongPrefill(stepTarget: 'auto' | 'off', tpotMs?: number): Promise<{ times: number[]; targetMs: number }> {
  const runner = new MockRunner({
    realTime: false,
    contextTokens: 16384,
    maxBatchTokens: 2048,
    cost: { stepOverheadMs: 1, prefillTokenMs: 0.2, decodeSeqMs: 0.3, attendMsPerRowKcell: 0.15, speed: 1 },
  });
  const s = createScheduler({ scheduler: 'continuous', maxOutputTokens: 4096, stepTarget, prefixCache: false }, runner.info) as BatchScheduler;
  const out: Outcome[] = [];
  const engineLike = (t: number) => ({ runner, now: () => t }) as unknown as Parameters<typeof makeRequest>[0];
  // Warm the model with a few ordinary requests.
  for (let i = 0; i < 4; i++) s.add(makeRequest(engineLike(0), { prompt: `warm ${i} ${'a b c d '.repeat(60 + i * 40)}`, maxTokens: 12 }, `w${i}`, out));
  let t = 0;
  for (; s.numUnfinished > 0 && t < 2000; t++) await stepOnce(s, runner, t);
  const stream = makeRequest(engineLike(t), { prompt: 'stream me', maxTokens: 3000, ...(tpotMs === undefined ? {} : { tpotMs }) }, 'stream', out);
  s.add(stream);
  for (let k = 0; k < 5; k++) await stepOnce(s, runner, t++);
  const long = makeRequest(engineLike(t), { prompt: 'the river and the stone '.repeat(1200), maxTokens: 4 }, 'long', out);
  s.add(long);
  const times: number[] = [];
  for (let k = 0; k < 5000 && long.numComputedTokens < long.numPromptTokens; k++) {
    const plan = s.schedule(t);
    const res = await runner.execute(plan.runner);
    s.update(plan, res, t++);
    const carried = plan.scheduled.map((x) => x.request);
    if (carried.includes(stream) && carried.includes(long) && res.ok) times.push(res.computeMs);
  }
  assert.ok(long.numPromptTokens > 5000, `long prompt ${long.numPromptTokens} tokens`);
  // The target 'auto' works to: twice what a 256-token chunk adds to a step at the start of a prompt
  // (this mock's cost model, exactly: 256 prompt rows attending over the 256 cells they fill).
  const targetMs = 2 * (0.2 * 256 + (0.15 * 256 * 256) / 1000);
  if (stepTarget === 'auto') assert.ok(Math.abs(s.stepBudget!.targetMs()! / targetMs - 1) < 0.05, `learned target ${s.stepBudget!.targetMs()} vs ${targetMs}`);
  return { times, targetMs };
}

test('while a 6,000-token prompt prefills, the step budget holds a decoding stream\'s steps at the target; the fixed chunk lets them grow with depth', async () => {
  const budgeted = await streamStepsDuringLongPrefill('auto');
  const fixed = await streamStepsDuringLongPrefill('off');
  assert.ok(budgeted.times.length > 20 && fixed.times.length > 20);
  const max = (xs: number[]): number => Math.max(...xs);
  assert.ok(max(budgeted.times) < 1.2 * budgeted.targetMs, `budgeted: max ${max(budgeted.times)} ms vs target ${budgeted.targetMs}`);
  assert.ok(max(fixed.times) > 1.5 * fixed.targetMs, `fixed chunk: max ${max(fixed.times)} ms vs ${fixed.targetMs} (the test's premise)`);
});

test("a decoding stream's TPOT budget holds the steps that carry it while a 6,000-token prompt prefills, with the step budget off", async () => {
  const capped = await streamStepsDuringLongPrefill('off', 12);
  assert.ok(capped.times.length > 20);
  const sorted = [...capped.times].sort((a, b) => a - b);
  // Every step within 15% of the budget but the first few, taken before the chunk model had seen a mixed step.
  assert.ok(sorted[sorted.length - 4]! <= 12 * 1.15, `steps carrying the stream: ${sorted.slice(-6).map((x) => x.toFixed(1)).join(', ')} ms`);
  const uncapped = await streamStepsDuringLongPrefill('off');
  assert.ok(Math.max(...uncapped.times) > 3 * 12, 'without the budget the same steps grow with depth (the premise)');
});

test('row alignment: decode rows plus prompt rows come out a whole number of 64 where the budget allows', () => {
  assert.equal(alignedPromptBudget(1, 256), 255);
  assert.equal(alignedPromptBudget(3, 300), 253);
  assert.equal(alignedPromptBudget(0, 2048), 2048);
  assert.equal(alignedPromptBudget(5, 40), 40, 'below one block of rows: unchanged');
  assert.equal(alignedPromptBudget(70, 10), 10, 'rounding would leave no prompt row: unchanged');
  fc.assert(
    fc.property(fc.integer({ min: 0, max: 64 }), fc.integer({ min: 1, max: 2048 }), (d, p) => {
      const a = alignedPromptBudget(d, p);
      assert.ok(a > 0 && a <= p);
      if (a !== p) assert.equal((d + a) % 64, 0);
      assert.ok(p - a < 64);
    }),
  );
});

test('slowdown: about 1 while the machine is steady, about 3 once the same kinds of steps take three times as long', () => {
  const m = new StepCostModel();
  const slowdown = (): number | null => m.slowdown; // a getter: read afresh, not narrowed
  assert.equal(slowdown(), null, 'no reference yet');
  const all = steps(21, 400, 0.05);
  for (const [shape, ms] of all) m.observe(shape, ms);
  assert.ok(Math.abs((slowdown() ?? 0) - 1) < 0.15, `steady: ${slowdown()}`);
  for (const [shape, ms] of all.slice(0, 100)) m.observe(shape, 3 * ms);
  assert.ok(Math.abs((slowdown() ?? 0) - 3) < 0.5, `slowed: ${slowdown()}`);
});

test('the engine reports steps that turn far slower than before, and their recovery', async () => {
  const { makeEngine, runJobs } = await import('../../helpers/engine-driver.ts');
  const inner = new MockRunner({ realTime: false, cost: { stepOverheadMs: 2, prefillTokenMs: 0.2, decodeSeqMs: 0.5, speed: 1 } });
  let factor = 1;
  // The same runner, its reported step time multiplied by `factor` (a machine getting busy).
  const runner: typeof inner = Object.assign(Object.create(inner) as typeof inner, {
    execute: async (plan: Parameters<typeof inner.execute>[0]) => {
      const r = await inner.execute(plan);
      return r.ok ? { ...r, computeMs: r.computeMs * factor } : r;
    },
  });
  const engine = makeEngine(runner, { scheduler: 'continuous' });
  const events: [boolean, number][] = [];
  engine.onSlowSteps((slow, slowdown) => events.push([slow, slowdown]));
  const jobs = (tag: string) => Array.from({ length: 6 }, (_, i) => ({ prompt: `${tag} ${i} ${'the river and the stone '.repeat(10 + 8 * i)}`, maxTokens: 40 }));
  for (let round = 0; round < 3; round++) await runJobs(engine, jobs(`steady ${round}`));
  assert.equal(events.length, 0, 'a steady machine raises nothing');
  assert.ok(engine.stats().stepTime!.slowdown! < 1.5);
  factor = 5;
  for (let round = 0; round < 3; round++) await runJobs(engine, jobs(`busy ${round}`));
  const first = events[0];
  assert.ok(first !== undefined && first[0], 'slow steps were reported');
  assert.ok(first[1] >= 3, `slowdown ${first[1]}`);
  assert.equal(engine.stats().stepTime!.slow, true);
  // /stats shows the chunk model as it stands: prompts beside decoding requests have taught it.
  const { small, tiled } = engine.stats().stepTime!.chunkCost;
  assert.ok([small, tiled].some((l) => l !== null && l.length === 3 && l[1]! + l[2]! > 0), `chunk cost ${JSON.stringify({ small, tiled })}`);
  factor = 1;
  for (let round = 0; round < 4; round++) await runJobs(engine, jobs(`calm ${round}`));
  assert.equal(events.at(-1)?.[0], false, 'and their recovery');
  await engine.stop();
});
