// The ladder's plan and the report's comparison rules, as pure functions: rate-major order with
// the rung order rotated per rate, the anchor twice per block, the grid from a capacity, which
// transitions "everything that got worse" compares, and what counts as worse.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ANCHOR_RUNG_ID, planRuns, rateGrid, RUNGS } from '../../src/harness/ladder/plan.ts';
import { transitions, worsening } from '../../src/harness/study-report/checks.ts';

test('runs are rate-major, rungs rotate by one per rate, the anchor closes every block', () => {
  const rungs = ['1-fifo', '3-continuous', ANCHOR_RUNG_ID];
  const runs = planRuns(rungs, [2, 1, 3], [7, 8]);
  assert.equal(runs.length, 3 * 2 * 4);
  // Rates ascending, each rate's runs contiguous.
  assert.deepEqual([...new Set(runs.map((r) => r.rate))], [1, 2, 3]);
  for (let i = 1; i < runs.length; i++) assert.ok(runs[i]!.rate >= runs[i - 1]!.rate);
  const firstBlockOf = (rate: number): string[] => runs.filter((r) => r.rate === rate && r.seed === 7).map((r) => r.rungId);
  assert.deepEqual(firstBlockOf(1), ['1-fifo', '3-continuous', ANCHOR_RUNG_ID, ANCHOR_RUNG_ID]);
  assert.deepEqual(firstBlockOf(2), ['3-continuous', ANCHOR_RUNG_ID, '1-fifo', ANCHOR_RUNG_ID]);
  assert.deepEqual(firstBlockOf(3), [ANCHOR_RUNG_ID, '1-fifo', '3-continuous', ANCHOR_RUNG_ID]);
  // Every block: each rung once at rep 1, the anchor's rep 2 last.
  for (let b = 0; b < 6; b++) {
    const block = runs.filter((r) => r.block === b);
    assert.equal(block.at(-1)!.rep, 2);
    assert.equal(block.at(-1)!.rungId, ANCHOR_RUNG_ID);
    assert.deepEqual(block.filter((r) => r.rep === 1).map((r) => r.rungId).sort(), [...rungs].sort());
  }
  assert.equal(new Set(runs.map((r) => r.runId)).size, runs.length, 'run ids are unique');
  assert.deepEqual(runs.map((r) => r.index), runs.map((_, i) => i));
});

test('no anchor rung, no second run', () => {
  const runs = planRuns(['1-fifo', '2-static'], [1], [1]);
  assert.deepEqual(runs.map((r) => r.runId), ['rate-1/seed-1/1-fifo', 'rate-1/seed-1/2-static']);
});

test('the rate grid spans the multipliers of the capacity, rounded and deduplicated', () => {
  assert.deepEqual(rateGrid(1.37, [0.25, 0.5, 1, 3]), [0.34, 0.69, 1.4, 4.1]);
  assert.deepEqual(rateGrid(1, [1, 1.001]), [1]);
  assert.throws(() => rateGrid(0, [1]), /capacity > 0/);
});

test('transitions: each rung against the one before; every rung-5 arm against the last rung without admission', () => {
  const ids = RUNGS.map((r) => r.id);
  assert.deepEqual(transitions(ids), [
    ['1-fifo', '2-static'], ['2-static', '3-continuous'], ['3-continuous', '4-paged-prefix'],
    ['4-paged-prefix', '5-admission-80'], ['4-paged-prefix', '5-admission-95'], ['4-paged-prefix', '5-admission-99'],
  ]);
});

test('worse: relative for rates and latencies (direction-aware, Infinity is a censored tail), points for shares', () => {
  const goodput = { name: 'g', f: () => 0, better: 1 as const, kind: 'relative' as const };
  const p99 = { name: 'p', f: () => 0, better: -1 as const, kind: 'relative' as const };
  const share = { name: 's', f: () => 0, better: -1 as const, kind: 'points' as const };
  assert.ok(Math.abs(worsening(goodput, 2, 1.8) - 0.1) < 1e-12);
  assert.ok(worsening(goodput, 2, 2.2) < 0);
  assert.ok(Math.abs(worsening(p99, 1000, 1100) - 0.1) < 1e-12);
  assert.equal(worsening(p99, 1000, Infinity), Infinity);
  assert.equal(worsening(p99, Infinity, Infinity), 0);
  assert.equal(worsening(goodput, 0, 0), 0);
  assert.equal(worsening(goodput, 0.5, 0), 1);
  assert.ok(Math.abs(worsening(share, 0, 0.2) - 0.2) < 1e-12);
  assert.ok(Number.isNaN(worsening(p99, NaN, 1)));
});
