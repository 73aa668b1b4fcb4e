// Split-conformal calibration: the finite-sample quantile of calibration scores, and the small-n
// guard that says "this much data cannot certify that level" as a value.
//
// Why ⌈(n+1)(1−α)⌉: under exchangeability a new score is equally likely to take any of the n+1
// ranks among the n calibration scores and itself, so it is at most the k-th smallest of the n with
// probability k/(n+1). k = ⌈(n+1)(1−α)⌉ is the smallest k with k/(n+1) ≥ 1−α; the marginal coverage
// is then exactly k/(n+1) ∈ [1−α, 1−α + 1/(n+1)) for continuous scores. Using n in place of n+1
// drops exactly the term that buys the guarantee. When k > n no calibration score is high enough
// (α = 0.01 first becomes attainable at n = 99) and the honest quantile is +∞.
//
// The guard: below `minN` scores (100 by default, as the reference used) a calibration is reported
// 'uncalibrated' rather than as q = +∞, because a +∞ bound refuses everything and an engine that
// refuses everything never produces the outcomes that would calibrate it. The controller explores
// instead (decision/exploration.ts). A rank past n at n ≥ minN is reported the same way with its
// own reason, so /stats can tell "too little data yet" from "this α needs more data than minN".
//
// Complexity: conformalRank O(1); conformalQuantile O(1) on sorted scores; calibrate O(n log n).

import type { Score } from './score.ts';

/** The default small-n guard. */
export const DEFAULT_MIN_N = 100;

/** One calibration pair: the base prediction, the observed latency, and the predictor's second input. */
export interface Observation {
  readonly yhat: number;
  readonly y: number;
  /** σ̂ for the scaled score; ignored by the others. */
  readonly aux?: number;
}

/** Why a calibration cannot certify its level. */
export type UncalibratedReason =
  /** Fewer than minN scores. */
  | 'below_min_n'
  /** ⌈(n+1)(1−α)⌉ > n: the level needs more scores than there are. */
  | 'level_unattainable';

/** The outcome of calibrating at level 1−α: a plain value for /stats and tests. */
export type Calibration =
  | {
      readonly status: 'calibrated';
      /** Miscoverage the bound promises at most. */
      readonly alpha: number;
      /** Scores used. */
      readonly n: number;
      /** ⌈(n+1)(1−α)⌉, 1-based, ≤ n. */
      readonly rank: number;
      /** The rank-th smallest score. */
      readonly q: number;
    }
  | {
      readonly status: 'uncalibrated';
      readonly reason: UncalibratedReason;
      readonly alpha: number;
      readonly n: number;
      /** The guard this calibration was held to. */
      readonly minN: number;
    };

export interface CalibrateOptions {
  /** Miscoverage in (0, 1): the bound holds with probability ≥ 1−α. */
  readonly alpha: number;
  /** The small-n guard; 100 by default. */
  readonly minN?: number;
}

/**
 * ⌈(n+1)(1−α)⌉, computed so that floating-point noise cannot add a rank: (n+1)(1−α) is snapped to
 * the nearest integer when within 1e-9·(n+1) of it ((1 − 0.07)·100 is 93.00000000000001 in doubles,
 * and 94 would be one rank more conservative than the theorem asks).
 */
export function conformalRank(n: number, alpha: number): number {
  validateN('conformalRank', n);
  validateAlpha('conformalRank', alpha);
  const x = (n + 1) * (1 - alpha);
  const nearest = Math.round(x);
  return Math.abs(x - nearest) <= 1e-9 * (n + 1) ? nearest : Math.ceil(x);
}

/**
 * The fewest scores whose conformal rank exists (⌈(n+1)(1−α)⌉ ≤ n): 19 at α = 0.05, 99 at 0.01.
 * O(1/α), by the same rank rule (no closed form that floating point could disagree with).
 */
export function minCalibrationSize(alpha: number): number {
  let n = 1;
  while (conformalRank(n, alpha) > n) n++;
  return n;
}

/** The finite-sample conformal quantile of ascending `sorted`: its ⌈(n+1)(1−α)⌉-th smallest, +∞ past n. */
export function conformalQuantile(sorted: ArrayLike<number>, alpha: number): number {
  const k = conformalRank(sorted.length, alpha);
  return k > sorted.length ? Infinity : sorted[k - 1]!;
}

/** Scores `observations` with `score` and calibrates them at level 1−α. */
export function calibrate(observations: readonly Observation[], score: Score, options: CalibrateOptions): Calibration {
  const { alpha, minN = DEFAULT_MIN_N } = options;
  validateAlpha('calibrate', alpha);
  validateMinN('calibrate', minN);
  const scores = new Float64Array(observations.length);
  for (let i = 0; i < observations.length; i++) {
    const o = observations[i]!;
    scores[i] = score.score(o.yhat, o.y, o.aux);
  }
  scores.sort();
  return calibrationOf(scores, alpha, minN);
}

/** A Calibration from ascending scores (no copy, no sort). */
export function calibrationOf(sorted: ArrayLike<number>, alpha: number, minN: number): Calibration {
  const n = sorted.length;
  if (n < minN) return { status: 'uncalibrated', reason: 'below_min_n', alpha, n, minN };
  const rank = conformalRank(n, alpha);
  if (rank > n) return { status: 'uncalibrated', reason: 'level_unattainable', alpha, n, minN };
  return { status: 'calibrated', alpha, n, rank, q: sorted[rank - 1]! };
}

export function validateAlpha(who: string, alpha: number): void {
  if (!(alpha > 0 && alpha < 1)) throw new RangeError(`${who}: expected alpha in (0, 1), got ${String(alpha)}`);
}

export function validateMinN(who: string, minN: number): void {
  if (!Number.isSafeInteger(minN) || minN < 1) throw new RangeError(`${who}: expected minN to be a positive integer, got ${String(minN)}`);
}

function validateN(who: string, n: number): void {
  if (!Number.isSafeInteger(n) || n < 0) throw new RangeError(`${who}: expected n to be a non-negative integer, got ${String(n)}`);
}
