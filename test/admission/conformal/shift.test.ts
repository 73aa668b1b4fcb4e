// A distribution shift on one seeded stream: latency's scale doubles mid-stream (the machine got
// slower, a longer-output workload arrived). The static calibrator keeps its pre-shift quantile and
// its coverage collapses; rolling and ACI, fed the same outcomes, recover it. "Recovered" is measured
// as the first post-shift observation from which every later block of 200 covers ≥ 1−α − 0.05
// (0.05 is 2.4 binomial standard errors at n = 200, so a recovered calibrator rarely trips it).

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createOnlineCalibrator, type CalibratorMode, type OnlineCalibrator, type OnlineCalibratorConfig } from '../../../src/admission/conformal/online-calibrator.ts';
import { ratioScore } from '../../../src/admission/conformal/score.ts';
import { Rng } from '../../../src/util/rng.ts';

const ALPHA = 0.1;
const PRE = 3000;
const POST = 6000;
const BLOCK = 500;
const RECOVERY_BLOCK = 200;

interface Pair {
  readonly yhat: number;
  readonly y: number;
}

/** ŷ is the pre-shift conditional median; after PRE observations every latency doubles. */
function stream(seed: number): Pair[] {
  const rng = new Rng(seed, 'shift');
  return Array.from({ length: 500 + PRE + POST }, (_, t) => {
    const yhat = 500 + 2500 * rng.uniform();
    const scale = t >= 500 + PRE ? 2 : 1;
    return { yhat, y: scale * yhat * Math.exp(0.5 * rng.normal()) };
  });
}

/** Runs a calibrator over the stream (bound first, then the outcome) and returns covered[t] after calibration. */
function run(cal: OnlineCalibrator, pairs: readonly Pair[]): boolean[] {
  const covered: boolean[] = [];
  for (const { yhat, y } of pairs) {
    const b = cal.bound(yhat);
    if (b.status !== 'calibrated') throw new Error('bug: the stream starts calibrated');
    covered.push(y <= b.upper);
    cal.observe(yhat, y);
  }
  return covered;
}

const rate = (xs: readonly boolean[]): number => xs.filter(Boolean).length / xs.length;

/** First index (a multiple of 10) from which every block of RECOVERY_BLOCK covers ≥ 1−α − 0.05 (Infinity: never). */
function recoveryIndex(post: readonly boolean[]): number {
  const ok = (from: number): boolean => {
    for (let s = from; s + RECOVERY_BLOCK <= post.length; s += RECOVERY_BLOCK) if (rate(post.slice(s, s + RECOVERY_BLOCK)) < 1 - ALPHA - 0.05) return false;
    return true;
  };
  for (let t = 0; t + RECOVERY_BLOCK <= post.length; t += 10) if (ok(t)) return t;
  return Infinity;
}

describe('distribution shift: latency scale doubles mid-stream', () => {
  const pairs = stream(7);
  const initial = pairs.slice(0, 500);
  const live = pairs.slice(500);
  const configs: OnlineCalibratorConfig[] = [
    { mode: 'static', score: ratioScore, alpha: ALPHA, initial },
    { mode: 'rolling', score: ratioScore, alpha: ALPHA, window: 512, initial },
    // A long window, so what recovers ACI is its working level, not the window turning over.
    { mode: 'aci', score: ratioScore, alpha: ALPHA, window: 5000, gamma: 0.005, initial },
  ];
  const results = new Map(configs.map((c) => [c.mode, run(createOnlineCalibrator(c), live)]));
  const summary = (mode: CalibratorMode) => {
    const covered = results.get(mode)!;
    const post = covered.slice(PRE);
    return { pre: rate(covered.slice(0, PRE)), post: rate(post), firstBlock: rate(post.slice(0, BLOCK)), recovery: recoveryIndex(post) };
  };
  for (const mode of ['static', 'rolling', 'aci'] as const) {
    const s = summary(mode);
    console.log(`shift ${mode}: coverage before ${s.pre.toFixed(3)}, after ${s.post.toFixed(3)}, first ${BLOCK} after ${s.firstBlock.toFixed(3)}, recovered ${s.recovery} observations after the shift`);
  }

  it('every mode covers before the shift', () => {
    for (const mode of ['static', 'rolling', 'aci'] as const) assert.ok(Math.abs(summary(mode).pre - (1 - ALPHA)) < 0.03, `${mode}: ${summary(mode).pre}`);
  });

  it('the static calibrator loses coverage and never gets it back', () => {
    const s = summary('static');
    assert.ok(s.post < 0.6, `static after the shift: ${s.post}`);
    assert.equal(s.recovery, Infinity);
  });

  it('ACI recovers within 300 observations, on its working level alone', () => {
    const s = summary('aci');
    assert.ok(s.recovery <= 300, `ACI recovered after ${s.recovery}`);
    assert.ok(s.post >= 1 - ALPHA - 0.02, `ACI after the shift: ${s.post}`);
  });

  it('rolling recovers within about one window (≤ 700 observations for a window of 512)', () => {
    const s = summary('rolling');
    assert.ok(s.recovery <= 700, `rolling recovered after ${s.recovery}`);
    assert.ok(s.post >= 1 - ALPHA - 0.03, `rolling after the shift: ${s.post}`);
  });
});
