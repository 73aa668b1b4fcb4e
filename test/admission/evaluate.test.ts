// Offline evaluation on synthetic traces whose latency depends on queued work and requested
// length: every predictor covers (validity does not depend on the model), and the learned one
// gives a narrower bound than the constant (what a good model buys).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Dataset } from '../../src/admission/dataset.ts';
import { blocksOf } from '../../src/admission/dataset.ts';
import { evaluate, evaluateRotations, wilson } from '../../src/admission/evaluate.ts';
import { FEATURE_NAMES, NUM_FEATURES } from '../../src/admission/features.ts';
import { Rng } from '../../src/util/rng.ts';

function synthetic(seed: number): Dataset {
  const rng = new Rng(seed);
  const rows: { x: number[]; y: number; round: string; rate: number }[] = [];
  const col = (n: string) => FEATURE_NAMES.indexOf(n as (typeof FEATURE_NAMES)[number]);
  for (let round = 0; round < 4; round++) {
    for (const rate of [0.5, 1, 2]) {
      for (let i = 0; i < 300; i++) {
        const x = new Array<number>(NUM_FEATURES).fill(0);
        x[col('max_tokens')] = 16 + Math.floor(rng.uniform() * 240);
        x[col('new_prefill_tokens')] = 50 + Math.floor(rng.uniform() * 400);
        x[col('prompt_work_ahead')] = Math.floor(rng.uniform() * 2000 * rate);
        x[col('running')] = Math.floor(rng.uniform() * 8 * rate);
        const mean = 200 + 10 * x[col('max_tokens')]! + 0.5 * x[col('prompt_work_ahead')]! + 0.3 * x[col('new_prefill_tokens')]!;
        rows.push({ x, y: mean * Math.exp(0.25 * rng.normal()), round: String(round), rate });
      }
    }
  }
  return {
    featureNames: FEATURE_NAMES,
    x: Float64Array.from(rows.flatMap((r) => r.x)),
    y: Float64Array.from(rows.map((r) => r.y)),
    group: rows.map((r) => `${r.round}/${r.rate}`),
    round: rows.map((r) => r.round),
    rate: Float64Array.from(rows.map((r) => r.rate)),
    numRows: rows.length,
    numRead: rows.length,
    numDropped: 0,
  };
}

test('offline evaluation: every predictor covers; the GBDT bound is narrower than the constant one', () => {
  const ds = synthetic(3);
  const ev = evaluate(ds, { train: blocksOf(ds, ['0', '1']), calibration: blocksOf(ds, ['2']), test: blocksOf(ds, ['3']), alphas: [0.2, 0.1], sloMs: 3000 });
  assert.ok(ev.selection !== null, 'score and level chosen on the held-out slice');
  for (const r of ev.rows) {
    assert.ok(r.coverageHigh >= 1 - r.alpha, `${r.predictor}/${r.score} α=${r.alpha}: coverage ${r.coverage.toFixed(3)} [${r.coverageLow.toFixed(3)}, ${r.coverageHigh.toFixed(3)}]`);
  }
  const width = (p: string) => ev.rows.find((r) => r.predictor === p && r.score === 'ratio' && r.alpha === 0.1)!.meanBoundMs;
  assert.ok(width('gbdt') < 0.9 * width('constant'), `gbdt ${width('gbdt').toFixed(0)} vs constant ${width('constant').toFixed(0)} ms`);
  const admits = (p: string) => ev.rows.find((r) => r.predictor === p && r.score === 'ratio' && r.alpha === 0.1)!.admitShare;
  assert.ok(admits('gbdt') > admits('constant') + 0.2, `at a 3 s SLO the GBDT bound admits ${admits('gbdt').toFixed(2)}, the constant ${admits('constant').toFixed(2)}`);
  assert.ok(ev.importance !== null && ev.importance.length === NUM_FEATURES);
});

test('rotations: every round tested once, calibration rounds after it, pooled counts are the sums, and pooled coverage holds', () => {
  const ds = synthetic(5);
  const rounds = ['0', '1', '2', '3'];
  const { rotations, pooled } = evaluateRotations(ds, rounds, 2, { alphas: [0.2, 0.05], sloMs: 3000 }, (r) => blocksOf(ds, r));
  assert.deepEqual(
    rotations.map((r) => [r.test, r.calibration.join(','), r.train.join(',')]),
    [
      ['0', '1,2', '3'],
      ['1', '2,3', '0'],
      ['2', '3,0', '1'],
      ['3', '0,1', '2'],
    ],
  );
  assert.equal(pooled.length, 3 * 3 * 2, 'predictor × score × α');
  for (const p of pooled) {
    const cells = rotations.map((r) => r.evaluation.rows.find((x) => x.predictor === p.predictor && x.score === p.score && x.alpha === p.alpha)!);
    assert.equal(p.numTest, cells.reduce((a, c) => a + c.numTest, 0));
    assert.equal(p.numCovered, cells.reduce((a, c) => a + c.numCovered, 0));
    assert.equal(p.numTest, ds.numRows, 'each row is tested exactly once');
    assert.ok(p.rotationMin <= p.coverage && p.coverage <= p.rotationMax);
    assert.ok(p.coverageHigh >= 1 - p.alpha, `${p.predictor}/${p.score} α=${p.alpha}: pooled ${p.coverage.toFixed(3)} [${p.coverageLow.toFixed(3)}, ${p.coverageHigh.toFixed(3)}]`);
    assert.ok(p.numAdmittedInsideSlo <= p.numAdmitted && p.numAdmitted <= p.numTest);
  }
  const scaledRow = pooled.find((p) => p.predictor === 'gbdt' && p.score === 'scaled' && p.alpha === 0.2)!;
  assert.ok(Number.isFinite(scaledRow.meanBoundMs), 'the scaled score bounds every row');
  assert.throws(() => evaluateRotations(ds, ['0', '1', '2'], 2, { alphas: [0.1], sloMs: 3000 }, (r) => blocksOf(ds, r)), /need at least 4 rounds/);
});

test('wilson interval', () => {
  const [lo, hi] = wilson(90, 100);
  assert.ok(lo > 0.82 && lo < 0.84 && hi > 0.94 && hi < 0.95, `${lo} ${hi}`);
});
