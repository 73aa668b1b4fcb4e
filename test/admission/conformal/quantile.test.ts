import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { calibrate, calibrationOf, conformalQuantile, conformalRank } from '../../../src/admission/conformal/quantile.ts';
import { absoluteScore } from '../../../src/admission/conformal/score.ts';

const SEED = 20261130;

describe('the finite-sample conformal quantile', () => {
  it('takes the ⌈(n+1)(1−α)⌉-th smallest score: exact ranks for small n', () => {
    // (n, α) → rank, worked by hand.
    const cases: [number, number, number][] = [
      [9, 0.1, 9], // 10·0.9 = 9
      [10, 0.1, 10], // 11·0.9 = 9.9
      [19, 0.1, 18], // 20·0.9 = 18
      [19, 0.05, 19], // 20·0.95 = 19
      [4, 0.2, 4], // 5·0.8 = 4
      [5, 0.2, 5], // 6·0.8 = 4.8
      [99, 0.01, 99], // 100·0.99 = 99: α = 0.01 becomes attainable here
      [98, 0.01, 99], // 99·0.99 = 98.01 → 99 > n
      [99, 0.07, 93], // 100·0.93 = 93.00000000000001 in doubles: still 93
      [1, 0.5, 1], // 2·0.5 = 1
      [0, 0.5, 1],
    ];
    for (const [n, alpha, rank] of cases) {
      assert.equal(conformalRank(n, alpha), rank, `n ${n} α ${alpha}`);
    }
    const sorted = Float64Array.from({ length: 19 }, (_, i) => i + 1); // 1..19
    assert.equal(conformalQuantile(sorted, 0.1), 18);
    assert.equal(conformalQuantile(sorted, 0.05), 19);
    assert.equal(conformalQuantile(sorted.subarray(0, 10), 0.1), 10);
  });

  it('is +∞ when the rank passes n: too few scores to certify the level', () => {
    assert.equal(conformalQuantile(Float64Array.from([1, 2, 3, 4, 5, 6, 7, 8]), 0.1), Infinity); // 9·0.9 = 8.1 → 9 > 8
    assert.equal(conformalQuantile(new Float64Array(98).fill(1), 0.01), Infinity);
    assert.equal(conformalQuantile(new Float64Array(99).fill(1), 0.01), 1);
    assert.equal(conformalQuantile([], 0.5), Infinity);
  });

  it('property: the rank is the smallest k with k/(n+1) ≥ 1−α', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 5000 }), fc.double({ min: 1e-4, max: 0.9999, noNaN: true }), (n, alpha) => {
        const k = conformalRank(n, alpha);
        assert.ok(k / (n + 1) >= 1 - alpha - 1e-9);
        assert.ok((k - 1) / (n + 1) < 1 - alpha);
      }),
      { seed: SEED, numRuns: 3000 },
    );
  });

  it('validates α and n', () => {
    assert.throws(() => conformalRank(10, 0), /expected alpha in \(0, 1\), got 0/);
    assert.throws(() => conformalRank(10, 1), /expected alpha in \(0, 1\), got 1/);
    assert.throws(() => conformalRank(-1, 0.1), /expected n to be a non-negative integer, got -1/);
    assert.throws(() => calibrate([], absoluteScore, { alpha: 0.1, minN: 0 }), /expected minN to be a positive integer, got 0/);
  });
});

describe('calibrate', () => {
  const obs = (scores: readonly number[]) => scores.map((s) => ({ yhat: 100, y: 100 + s }));

  it('reports below_min_n under the guard (100 by default), whatever the level', () => {
    const c = calibrate(obs(Array.from({ length: 99 }, (_, i) => i)), absoluteScore, { alpha: 0.5 });
    assert.deepEqual(c, { status: 'uncalibrated', reason: 'below_min_n', alpha: 0.5, n: 99, minN: 100 });
    const d = calibrate(obs(Array.from({ length: 100 }, (_, i) => i)), absoluteScore, { alpha: 0.5 });
    assert.deepEqual(d, { status: 'calibrated', alpha: 0.5, n: 100, rank: 51, q: 50 });
  });

  it('reports level_unattainable when the rank passes n at n ≥ minN (a value, not a throw)', () => {
    const c = calibrate(obs(Array.from({ length: 150 }, (_, i) => i)), absoluteScore, { alpha: 0.005 });
    assert.equal(c.status, 'uncalibrated');
    assert.equal(c.status === 'uncalibrated' && c.reason, 'level_unattainable');
  });

  it('with a small guard, ranks exactly: scores 10, 20, ..., 100 at α = 0.2 → the 9th (11·0.8 = 8.8)', () => {
    const shuffled = [70, 10, 100, 40, 20, 90, 30, 60, 80, 50];
    assert.deepEqual(calibrate(obs(shuffled), absoluteScore, { alpha: 0.2, minN: 5 }), { status: 'calibrated', alpha: 0.2, n: 10, rank: 9, q: 90 });
    assert.deepEqual(calibrationOf([1, 2, 3], 0.2, 3), { status: 'uncalibrated', reason: 'level_unattainable', alpha: 0.2, n: 3, minN: 3 }); // 4·0.8 = 3.2
  });
});
