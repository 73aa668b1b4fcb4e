import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { absoluteScore, nextDown, nextUp, ratioScore, scaledScore, type Score } from '../../../src/admission/conformal/score.ts';

const SEED = 20261130;
const latency = fc.double({ min: 0, max: 1e6, noNaN: true });
const quantile = fc.double({ min: -5, max: 5, noNaN: true });

const scores: { score: Score; aux: fc.Arbitrary<number | undefined> }[] = [
  { score: absoluteScore, aux: fc.constant(undefined) },
  { score: ratioScore, aux: fc.constant(undefined) },
  { score: scaledScore(), aux: fc.double({ min: 1e-3, max: 1e4, noNaN: true }) },
  { score: scaledScore({ scale: (yhat) => 1 + 0.3 * yhat }), aux: fc.constant(undefined) },
];

describe('nonconformity scores', () => {
  for (const { score, aux } of scores) {
    it(`${score.name}: y ≤ bound(ŷ, q) exactly when score(ŷ, y) ≤ q, in floating point`, () => {
      fc.assert(
        fc.property(latency, latency, quantile, aux, (yhat, y, q0, a) => {
          const q = score.name === 'absolute' ? q0 * 1000 : q0;
          const b = score.bound(yhat, q, a);
          assert.equal(y <= b, score.score(yhat, y, a) <= q, `ŷ ${yhat} y ${y} q ${q} bound ${b}`);
          // b is the largest such float: one ulp more already scores above q.
          if (Number.isFinite(b)) assert.ok(score.score(yhat, nextUp(b), a) > q);
        }),
        { seed: SEED, numRuns: 2000 },
      );
    });

    it(`${score.name}: bound(ŷ, score(ŷ, y)) gives back y`, () => {
      fc.assert(
        fc.property(latency, latency, aux, (yhat, y, a) => {
          const b = score.bound(yhat, score.score(yhat, y, a), a);
          // b ≥ y always (y itself scores ≤ q); equal unless y's neighbours share its score.
          assert.ok(b >= y);
          assert.ok(score.score(yhat, b, a) === score.score(yhat, y, a)); // === : +0 and −0 are one score
        }),
        { seed: SEED, numRuns: 2000 },
      );
    });
  }

  it('the bound is +∞ at q = +∞ and NaN q is a bug', () => {
    assert.equal(ratioScore.bound(100, Infinity), Infinity);
    assert.throws(() => absoluteScore.bound(100, NaN), /^BugError: bug: /);
  });

  it('rejects inputs outside each domain as bugs', () => {
    assert.throws(() => ratioScore.score(-1, 5), /bug: ratio score expected yhat > −1, got -1/);
    assert.throws(() => absoluteScore.score(NaN, 5), /bug: absolute score expected a finite yhat/);
    assert.throws(() => scaledScore().score(1, 2), /bug: scaled score needs aux/);
    assert.throws(() => scaledScore().score(1, 2, 0), /expected σ̂ > 0, got 0/);
    assert.throws(() => scaledScore({ scale: 3 as unknown as (x: number) => number }), /expected scale to be a function, got number/);
  });

  it('ratio is a multiplier: the same q stretches a 0.5 s and a 50 s prediction by the same factor of (1 + ŷ)', () => {
    const q = Math.log(2);
    assert.ok(Math.abs(ratioScore.bound(499, q) - 999) < 1e-9);
    assert.ok(Math.abs(ratioScore.bound(49_999, q) - 99_999) < 1e-6);
  });

  it('nextUp/nextDown step one float', () => {
    assert.equal(nextUp(1), 1 + Number.EPSILON);
    assert.equal(nextDown(1), 1 - Number.EPSILON / 2);
    assert.equal(nextUp(0), Number.MIN_VALUE);
    assert.ok(nextUp(-Number.MIN_VALUE) === 0);
    assert.equal(nextDown(0), -Number.MIN_VALUE);
    assert.equal(nextUp(2 ** 32 * Number.MIN_VALUE - Number.MIN_VALUE), 2 ** 32 * Number.MIN_VALUE, 'the carry into the high word');
    assert.equal(nextDown(2 ** 32 * Number.MIN_VALUE), 2 ** 32 * Number.MIN_VALUE - Number.MIN_VALUE, 'the borrow from the high word');
  });

  it('property: nextUp/nextDown agree with stepping the bits as one 64-bit integer', () => {
    const f = new Float64Array(1);
    const i = new BigInt64Array(f.buffer);
    const key = (x: number): bigint => {
      f[0] = Math.abs(x);
      return x < 0 ? -i[0]! : i[0]!;
    };
    const fromKey = (k: bigint): number => {
      i[0] = k < 0n ? -k : k;
      return k < 0n ? -f[0]! : f[0]!;
    };
    fc.assert(
      fc.property(fc.double({ noNaN: true, noDefaultInfinity: true, min: -Number.MAX_VALUE, max: Number.MAX_VALUE }), (x) => {
        if (x < Number.MAX_VALUE) assert.ok(Object.is(nextUp(x), fromKey(key(x) + 1n)) || (nextUp(x) === 0 && fromKey(key(x) + 1n) === 0), `nextUp(${x})`);
        if (x > -Number.MAX_VALUE) assert.ok(Object.is(nextDown(x), fromKey(key(x) - 1n)) || (nextDown(x) === 0 && fromKey(key(x) - 1n) === 0), `nextDown(${x})`);
      }),
      { numRuns: 5000 },
    );
  });
});
