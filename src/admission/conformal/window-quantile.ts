// The conformal quantile of a SortedWindow at level 1−α, with the small-n guard: the one rule the
// online calibrators share (quantile.ts's calibrationOf, without allocating a copy). O(1).

import { conformalRank, type UncalibratedReason } from './quantile.ts';
import type { OnlineBound } from './online-calibrator.ts';
import type { Score } from './score.ts';
import type { SortedWindow } from './sorted-window.ts';

/**
 * q̂ of the window; a reason while n < minN. When the rank passes n, a fixed level reports
 * 'level_unattainable' (as split calibration does), while ACI's moving level asks for +∞ — that is
 * the algorithm's own answer to a run of misses, not a lack of data.
 */
export function windowQuantile(window: SortedWindow, alpha: number, minN: number, pastN: 'unattainable' | 'infinity'): number | UncalibratedReason {
  const n = window.size;
  if (n < minN) return 'below_min_n';
  const k = conformalRank(n, alpha);
  if (k <= n) return window.kth(k);
  return pastN === 'infinity' ? Infinity : 'level_unattainable';
}

/** The bound for ŷ under quantile-or-reason `q`. */
export function boundOf(score: Score, q: number | UncalibratedReason, yhat: number, aux: number | undefined): OnlineBound {
  return typeof q === 'number' ? { status: 'calibrated', upper: score.bound(yhat, q, aux) } : { status: 'uncalibrated', reason: q };
}

/** Validates the options every online calibrator shares. */
export function validateCommon(who: string, score: Score, minN: number, capacity: number): void {
  if (typeof score?.score !== 'function' || typeof score.bound !== 'function') {
    throw new TypeError(`${who}: expected score to be a Score, got ${typeof score}`);
  }
  if (!Number.isSafeInteger(minN) || minN < 1) throw new RangeError(`${who}: expected minN to be a positive integer, got ${String(minN)}`);
  if (minN > capacity) throw new RangeError(`${who}: expected minN ≤ the window (${capacity}), got ${minN}: it could never calibrate`);
}
