// Step time by decode batch (EngineSnapshot.stepMsByBatch): a mean per batch size, read as a
// monotone table (a larger batch never decodes faster; past the largest measured batch, scaled
// linearly), and the engine feeding it from its steps, so an idle engine after an overload prices a
// lone request at a lone request's step time.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { Engine } from '../../src/engine/engine.ts';
import { createScheduler } from '../../src/engine/scheduler/factory.ts';
import { RecentBatch, StepTimesByBatch, stepMsAtBatch } from '../../src/engine/snapshot.ts';
import { MockRunner } from '../../src/engine/runner/mock/mock-runner.ts';
import { makeRequest, sinkFor, type Outcome } from '../helpers/engine-driver.ts';
import { startTestServer } from '../helpers/headroom.ts';

test('StepTimesByBatch: null before a decode step; a step that decoded nothing is not counted', () => {
  const t = new StepTimesByBatch(8);
  assert.equal(t.table(), null);
  t.add(0, 50);
  assert.equal(t.table(), null, 'a prefill-only step');
  t.add(2, 4);
  assert.deepEqual(Array.from(t.table()!), [4, 4, 6, 8, 10, 12, 14, 16], 'below: the smallest measured; above: scaled by b / 2');
});

test('StepTimesByBatch: an exponentially weighted mean per batch size, its table monotone', () => {
  const t = new StepTimesByBatch(4, 0.5);
  t.add(1, 2);
  t.add(1, 4); // 2 + 0.5 × (4 − 2) = 3
  t.add(3, 2.5); // below batch 1's mean: the envelope keeps 3
  t.add(4, 9);
  assert.deepEqual(Array.from(t.table()!), [3, 3, 3, 9]);
  t.add(9, 11); // past maxBatch: counts as the largest batch. 9 + 0.5 × 2 = 10
  assert.equal(t.table()![3], 10);
  const copy = t.table()!;
  copy[0] = 100;
  assert.equal(t.table()![0], 3, 'table() hands out a copy');
});

test('StepTimesByBatch: the first steps at a batch size are averaged with equal weights, so a first long step does not stand for it', () => {
  const t = new StepTimesByBatch(2, 1 / 32);
  t.add(2, 150); // a 150 ms prefill chunk beside two decodes, then 31 plain 3 ms steps
  for (let i = 0; i < 31; i++) t.add(2, 3);
  assert.ok(Math.abs(t.table()![1]! - (150 + 31 * 3) / 32) < 1e-9, `the plain mean of 32 steps: ${t.table()![1]}`);
});

test('StepTimesByBatch.seed: an unmeasured size is the nearest measured one below grown by the warm-up\'s shape, not linearly', () => {
  const close = (got: Float64Array | null, want: number[]) => {
    assert.ok(got !== null && got.length === want.length && want.every((w, i) => Math.abs(got[i]! - w) < 1e-9), `${String(got && Array.from(got))} vs ${want.join(", ")}`);
  };
  // The warm-up timed plain decode steps: 9 ms at batch 1, 11 at 2, 14 at 4 (in any order).
  const seeded = new StepTimesByBatch(8, 1 / 32);
  seeded.seed([[4, 14], [1, 9], [2, 11]]);
  // Before any real step the table is that shape: interpolated between, scaled by b / 4 past 4.
  close(seeded.table(), [9, 11, 12.5, 14, 17.5, 21, 24.5, 28]);
  // Real steps at batch 1 take 10 ms (prefill sharing them): every larger size grows from there by the shape.
  seeded.add(1, 10);
  close(seeded.table(), [9, 11, 12.5, 14, 17.5, 21, 24.5, 28].map((w) => (10 * w) / 9));
  // Without a shape batch 2 read 2 × 10 ms, batch 8 80 ms.
  const unseeded = new StepTimesByBatch(8, 1 / 32);
  unseeded.add(1, 10);
  close(unseeded.table(), [10, 20, 30, 40, 50, 60, 70, 80]);
  // A measured size replaces the shape's reading of it, and the sizes above it grow from it; the table stays monotone.
  seeded.add(2, 13);
  close(seeded.table(), [10, 13, (13 * 12.5) / 11, (13 * 14) / 11, (13 * 17.5) / 11, (13 * 21) / 11, (13 * 24.5) / 11, (13 * 28) / 11]);
  seeded.add(3, 11); // measured below batch 2's mean: held at the envelope, 13
  assert.ok(Math.abs(seeded.table()![2]! - 13) < 1e-9);
  assert.ok(Math.abs(seeded.table()![3]! - (13 * 14) / 12.5) < 1e-9, 'batch 4 grows from the nearest measured size below it, batch 3');
  // Nothing usable: no shape.
  const empty = new StepTimesByBatch(4);
  empty.seed([[0, 5], [9, 5], [2, NaN], [3, 0]]);
  assert.equal(empty.table(), null);
});

test('StepTimesByBatch: property: the table is monotone, at least every measured mean at or below it, and stepMsAtBatch extends it', () => {
  fc.assert(
    fc.property(fc.array(fc.tuple(fc.integer({ min: 0, max: 20 }), fc.double({ min: 0.001, max: 1000, noNaN: true })), { maxLength: 60 }), (steps) => {
      const t = new StepTimesByBatch(16, 1);
      const last = new Map<number, number>();
      for (const [b, ms] of steps) {
        t.add(b, ms);
        if (b >= 1) last.set(Math.min(b, 16), ms);
      }
      const table = t.table();
      if (last.size === 0) return table === null;
      for (let i = 1; i < 16; i++) if (!(table![i]! >= table![i - 1]!)) return false;
      for (const [b, ms] of last) if (!(table![b - 1]! >= ms - 1e-9)) return false; // α = 1: the mean is the last step, to rounding
      return stepMsAtBatch(table, 32) === (table![15]! * 32) / 16 && stepMsAtBatch(table, 0) === table![0] && stepMsAtBatch(null, 3) === null;
    }),
  );
});

test('RecentBatch: relaxes toward each step\'s batch over the step, toward 0 over the idle time after it', () => {
  const r = new RecentBatch(1000);
  assert.equal(r.valueAt(0), 0, 'no step yet');
  r.add(8, 0, 1000); // one time constant at batch 8: 8 (1 − 1/e)
  assert.ok(Math.abs(r.valueAt(1000) - 8 * (1 - Math.exp(-1))) < 1e-12);
  assert.ok(Math.abs(r.valueAt(3000) - 8 * (1 - Math.exp(-1)) * Math.exp(-2)) < 1e-12, 'two time constants idle');
  r.add(2, 3000, 3000); // a zero-length step changes nothing but the clock
  assert.ok(Math.abs(r.valueAt(3000) - 8 * (1 - Math.exp(-1)) * Math.exp(-2)) < 1e-12);
  for (let t = 3000; t < 20_000; t += 10) r.add(2, t, t + 10);
  assert.ok(Math.abs(r.valueAt(20_000) - 2) < 1e-6, 'a steady batch of 2');
});

test('the engine measures step time by decode batch: an idle engine after a busy one reads batch 1 at its own step time', async () => {
  // Engine time the test moves: a step costs 2 ms plus 3 ms per sequence it decodes.
  let now = 0;
  const runner = new MockRunner({ cost: { speed: 0 } });
  const execute = runner.execute.bind(runner);
  runner.execute = async (plan) => {
    now += 2 + 3 * plan.items.filter((it) => it.tokens.length === 1).length;
    return execute(plan);
  };
  const engine = new Engine(runner, createScheduler({ scheduler: 'continuous', maxOutputTokens: 256 }, runner.info), { maxQueuedRequests: 10, clock: { nowMs: () => now } });
  engine.seedAverages({ stepMs: 2, prefillTokensPerS: 1000, decodeTokensPerS: 500 });
  assert.equal(engine.snapshot().stepMsByBatch, null, 'nothing decoded yet');
  engine.start();
  const out: Outcome[] = [];
  // Four at once: steps decoding 4, 3, 2, 1 sequences as they finish (different lengths).
  const reqs = [10, 20, 30, 40].map((n, i) => makeRequest(engine, { prompt: `busy ${i}`, maxTokens: n }, `b${i}`, out));
  for (const r of reqs) engine.submit(r, sinkFor(r));
  await engine.whenIdle();
  const s = engine.snapshot();
  assert.ok(s.longStepMs !== null && s.longStepMs > 2, `the long average remembers the busy steps: ${s.longStepMs}`);
  assert.ok(s.recentDecodeBatch !== undefined && s.recentDecodeBatch > 0.3, `the recent batch after a busy spell of about 0.3 s (τ = 2 s): ${s.recentDecodeBatch}`);
  now += 20_000;
  assert.ok(engine.snapshot().recentDecodeBatch! < 0.01, `after 20 s idle the snapshot is rebuilt and the recent batch is near 0: ${engine.snapshot().recentDecodeBatch}`);
  const table = s.stepMsByBatch!;
  assert.ok(Math.abs(stepMsAtBatch(table, 1)! - 5) < 0.5, `batch 1: 2 + 3 ms, got ${stepMsAtBatch(table, 1)}`);
  assert.ok(Math.abs(stepMsAtBatch(table, 4)! - 14) < 0.5, `batch 4: 2 + 12 ms, got ${stepMsAtBatch(table, 4)}`);
  await engine.stop();
});

test("the engine's estimates survive a restart: a fresh engine restores the step table and output lengths another one saved", async () => {
  let now = 0;
  const make = (maxSequences?: number) => {
    const runner = new MockRunner({ cost: { speed: 0 }, ...(maxSequences === undefined ? {} : { maxSequences }) });
    const execute = runner.execute.bind(runner);
    runner.execute = async (plan) => {
      now += 2 + 3 * plan.items.filter((it) => it.tokens.length === 1).length;
      return execute(plan);
    };
    return new Engine(runner, createScheduler({ scheduler: 'continuous', maxOutputTokens: 256 }, runner.info), { maxQueuedRequests: 30, clock: { nowMs: () => now } });
  };
  const busy = make();
  busy.seedAverages({ stepMs: 2, prefillTokensPerS: 1000, decodeTokensPerS: 500 });
  busy.start();
  const out: Outcome[] = [];
  const reqs = Array.from({ length: 24 }, (_, i) => makeRequest(busy, { prompt: `busy ${i}`, maxTokens: 5 + i }, `b${i}`, out));
  for (const r of reqs) busy.submit(r, sinkFor(r));
  await busy.whenIdle();
  await busy.stop();
  const saved = JSON.parse(JSON.stringify(busy.estimates())) as unknown;

  const fresh = make();
  assert.equal(fresh.snapshot(true).stepMsByBatch, null);
  assert.match(fresh.restoreEstimates(saved), /^24 output lengths, step times at \d+ batch sizes$/);
  const before = busy.snapshot(true);
  const after = fresh.snapshot(true);
  assert.deepEqual(after.stepMsByBatch, before.stepMsByBatch);
  assert.ok(after.stepMsByBatch !== null);
  assert.deepEqual(fresh.estimates(), busy.estimates());

  // Another slot count is another engine: refused, and neither estimate changes.
  const other = make(4);
  assert.throws(() => other.restoreEstimates(saved), /expected \{ mean, count \} for 4 batch sizes/);
  const blank = make();
  const nothing = blank.estimates();
  assert.throws(() => blank.restoreEstimates({ ...(saved as object), outputLengths: { lengths: [3], ended: ['yes'] } }), /expected lengths ≥ 0 and booleans/);
  assert.throws(() => blank.restoreEstimates(null), /expected \{ mean, count \}/);
  assert.deepEqual(blank.estimates(), nothing, 'a refused restore changed nothing');
});

test('the warm-up before serving times decode steps at larger batches and seeds the table with them', async () => {
  // The mock runner's step: speed × (2 ms + 0.5 ms per decoding sequence): 25 ms at batch 1, 30 at
  // 2, 100 at 16 with speed 10 — far under linear in the batch, which is how an unmeasured size read.
  const server = await startTestServer({ scheduler: { scheduler: 'continuous' }, mock: { cost: { speed: 10 }, maxSequences: 16 } });
  try {
    const stats = (await (await fetch(`${server.url}/stats`)).json()) as { engine: { stepMsByBatch: number[] } };
    const table = stats.engine.stepMsByBatch;
    assert.equal(table.length, 16, 'every size, before any request');
    assert.ok(table[1]! < 1.6 * table[0]!, `batch 2 timed, not twice batch 1: ${table.join(', ')}`);
    assert.ok(table[15]! < 8 * table[0]!, `batch 16 timed, not 16 × batch 1: ${table.join(', ')}`);
    assert.ok(table[15]! >= 90, `batch 16 costs at least its 100 ms less timer slack: ${table[15]}`);
  } finally {
    await server.close();
  }
});

test('StepTimesByBatch: a size with fewer than 1/α steps reads no slower than the settled size below it grown to it; once settled, its own mean', () => {
  const t = new StepTimesByBatch(4, 1 / 32);
  t.seed([[1, 5], [2, 7], [4, 10]]);
  for (let i = 0; i < 40; i++) t.add(1, 6); // batch 1 settled at 6 ms
  // Batch 2's first steps: one shared a 150 ms prompt chunk, three were plain.
  t.add(2, 150);
  for (let i = 0; i < 3; i++) t.add(2, 8);
  const grownTo2 = (6 * 7) / 5;
  assert.ok(Math.abs(t.table()![1]! - grownTo2) < 1e-9, `batch 2 at batch 1 grown by the shape (${grownTo2}), not its 4-step mean 43.5: ${t.table()![1]}`);
  assert.ok(Math.abs(t.table()![3]! - (grownTo2 * 10) / 7) < 1e-9, 'batch 4 grows from that reading');
  // 28 more steps at 40 ms: 32 steps, settled — its own mean, however slow.
  for (let i = 0; i < 28; i++) t.add(2, 40);
  const mean = (150 + 3 * 8 + 28 * 40) / 32;
  assert.ok(Math.abs(t.table()![1]! - mean) < 1e-9, `settled: ${t.table()![1]} vs ${mean}`);
  // Without a shape the cap is linear from the settled size.
  const u = new StepTimesByBatch(4, 1 / 32);
  for (let i = 0; i < 32; i++) u.add(1, 6);
  u.add(3, 100);
  assert.deepEqual(Array.from(u.table()!), [6, 6, 18, 24]);
  // A size below every settled one, or with none settled, keeps its mean.
  const v = new StepTimesByBatch(4, 1 / 32);
  v.add(1, 6);
  v.add(2, 100);
  assert.deepEqual(Array.from(v.table()!), [6, 100, 150, 200]);
});
