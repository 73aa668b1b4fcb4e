import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { AciCalibrator } from '../../../src/admission/conformal/aci-calibrator.ts';
import { createOnlineCalibrator } from '../../../src/admission/conformal/online-calibrator.ts';
import { RollingCalibrator } from '../../../src/admission/conformal/rolling-calibrator.ts';
import { absoluteScore, ratioScore } from '../../../src/admission/conformal/score.ts';
import { SortedWindow } from '../../../src/admission/conformal/sorted-window.ts';

const SEED = 20261130;

describe('SortedWindow', () => {
  it('property: the sorted view is always the sorted last-N scores', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 12 }), fc.array(fc.integer({ min: -5, max: 5 }), { maxLength: 80 }), (capacity, xs) => {
        const w = new SortedWindow(capacity);
        const reference: number[] = [];
        for (const x of xs) {
          w.push(x); // small integers: many ties, the case binary-search deletion gets wrong
          reference.push(x);
          if (reference.length > capacity) reference.shift();
          w.checkInvariants();
          assert.deepEqual(w.toArray(), reference);
          const sorted = [...reference].sort((a, b) => a - b);
          for (let k = 1; k <= w.size; k++) assert.equal(w.kth(k), sorted[k - 1]);
        }
      }),
      { seed: SEED, numRuns: 400 },
    );
  });

  it('rejects NaN and out-of-range ranks as bugs, bad capacities as options', () => {
    const w = new SortedWindow(3);
    assert.throws(() => w.push(NaN), /bug: NaN pushed/);
    assert.throws(() => w.kth(1), /bug: kth\(1\) of a window holding 0/);
    assert.throws(() => new SortedWindow(0), /expected capacity to be a positive integer, got 0/);
  });
});

describe('online calibrators', () => {
  const pairs = (n: number, score = 0) => Array.from({ length: n }, (_, i) => ({ yhat: 100, y: 100 + score + i }));

  it('stay uncalibrated under the guard and say why; state() reports mode, n, working α and q̂', () => {
    const c = new RollingCalibrator({ score: absoluteScore, alpha: 0.1, window: 200, initial: pairs(99) });
    assert.deepEqual(c.bound(500), { status: 'uncalibrated', reason: 'below_min_n' });
    c.observe(100, 199); // scores 0..99 now
    assert.deepEqual(c.bound(500), { status: 'calibrated', upper: 590 }); // 101·0.9 = 90.9 → 91st → score 90
    assert.deepEqual(c.state(), { mode: 'rolling', score: 'absolute', n: 100, alpha: 0.1, workingAlpha: 0.1, q: 90, status: 'calibrated', numObserved: 1, numMisses: 0 });
  });

  it('rolling forgets: after a window of new scores, q̂ is theirs alone', () => {
    const c = new RollingCalibrator({ score: absoluteScore, alpha: 0.5, window: 100, initial: pairs(100) });
    for (let i = 0; i < 100; i++) c.observe(100, 1100 + i); // scores 1000..1099
    c.checkInvariants();
    assert.equal(c.state().q, 1050);
  });

  it('a fixed level the window cannot certify is level_unattainable; ACI asks for +∞ instead', () => {
    const rolling = new RollingCalibrator({ score: absoluteScore, alpha: 0.005, window: 150, initial: pairs(150) });
    assert.deepEqual(rolling.bound(100), { status: 'uncalibrated', reason: 'level_unattainable' });
    const aci = new AciCalibrator({ score: absoluteScore, alpha: 0.005, window: 150, alphaRange: [0.001, 0.5], initial: pairs(150) });
    assert.deepEqual(aci.bound(100), { status: 'calibrated', upper: Infinity });
  });

  it('ACI: a miss lowers the working α by γ(1−α), a hit raises it by γα, within the clip range', () => {
    const c = new AciCalibrator({ score: absoluteScore, alpha: 0.1, gamma: 0.01, window: 200, initial: pairs(100) });
    c.observe(100, 10_000); // far above every score: a miss
    assert.ok(Math.abs(c.state().workingAlpha - (0.1 - 0.01 * 0.9)) < 1e-12);
    c.observe(100, 100); // score 0: a hit
    assert.ok(Math.abs(c.state().workingAlpha - (0.1 - 0.009 + 0.001)) < 1e-12);
    for (let i = 0; i < 1000; i++) c.observe(100, 100);
    assert.equal(c.state().workingAlpha, 0.5); // min(0.5, 5α)
    for (let i = 0; i < 1000; i++) c.observe(100, 1e9 + i); // each above every score so far: all misses
    assert.ok(Math.abs(c.state().workingAlpha - 0.002) < 1e-15); // α/50
    c.checkInvariants();
    // At α_t = 0.002 a window of 200 cannot certify the level: the bound is +∞ and nothing more is a miss.
    assert.deepEqual(c.bound(100), { status: 'calibrated', upper: Infinity });
    const misses = c.state().numMisses;
    c.observe(100, 2e9);
    assert.equal(c.state().numMisses, misses);
  });

  it('the factory builds each mode and validates options', () => {
    for (const mode of ['static', 'rolling', 'aci'] as const) assert.equal(createOnlineCalibrator({ mode, score: ratioScore, alpha: 0.1 }).mode, mode);
    assert.throws(() => createOnlineCalibrator({ mode: 'rolling', score: ratioScore, alpha: 0.1, window: 50 }), /expected minN ≤ the window \(50\), got 100/);
    assert.throws(() => createOnlineCalibrator({ mode: 'aci', score: ratioScore, alpha: 0.1, gamma: 0 }), /expected gamma in \(0, 1\], got 0/);
    assert.throws(() => createOnlineCalibrator({ mode: 'aci', score: ratioScore, alpha: 0.1, alphaRange: [0.2, 0.5] }), /expected alphaRange/);
    assert.throws(() => createOnlineCalibrator({ mode: 'nope' } as never), /expected mode static, rolling or aci, got nope/);
  });
});
