// Empirical quantiles, the pinball loss, and the checks every fit applies to its data.
//
// The empirical τ-quantile of n values is the k-th smallest with k = ceil(τ·n) (clamped to
// [1, n]): the lower end of the set of minimisers of the mean pinball loss, so a leaf or a shift
// set to it is optimal for the loss being fitted. τ·n is computed with a small tolerance so that
// 0.55 · 100 (= 55.00000000000001 in binary) picks the 55th value, not the 56th.
//
// Complexity: quantile O(n log n) (a native typed-array sort); pinball O(n).

import type { FeatureRow } from './predictor.ts';
import { bug } from '../../util/bug.ts';

/** Sorts `values[0, n)` in place and returns its empirical τ-quantile. `n` must be ≥ 1. */
export function quantileInPlace(values: Float64Array, n: number, quantile: number): number {
  if (n < 1 || n > values.length) bug(`quantileInPlace over ${n} of ${values.length} values`);
  const sorted = values.subarray(0, n).sort();
  const k = Math.min(n, Math.max(1, Math.ceil(quantile * n - 1e-7)));
  return sorted[k - 1]!;
}

/** Empirical τ-quantile of a copy of `values`. */
export function quantileOf(values: ArrayLike<number>, quantile: number): number {
  return quantileInPlace(Float64Array.from(values), values.length, quantile);
}

/** ρ_τ(y − q): τ·(y − q) when y ≥ q (under-prediction), (1 − τ)·(q − y) otherwise. */
export function pinball(y: number, q: number, quantile: number): number {
  const u = y - q;
  return u >= 0 ? quantile * u : (quantile - 1) * u;
}

/** Mean pinball loss of predictions `q` against outcomes `y`. */
export function meanPinball(y: ArrayLike<number>, q: ArrayLike<number>, quantile: number): number {
  if (y.length !== q.length || y.length === 0) bug(`meanPinball over ${y.length} outcomes and ${q.length} predictions`);
  let sum = 0;
  for (let i = 0; i < y.length; i++) sum += pinball(y[i]!, q[i]!, quantile);
  return sum / y.length;
}

/** Validates τ ∈ (0, 1). */
export function checkQuantile(who: string, quantile: unknown): number {
  if (typeof quantile !== 'number' || !(quantile > 0 && quantile < 1)) {
    throw new RangeError(`${who}: expected quantile in (0, 1), got ${String(quantile)}`);
  }
  return quantile;
}

/**
 * Validates a training set: at least one row, every row the same length, every value finite.
 * Returns the number of features. Non-finite values are rejected rather than binned, because a
 * NaN in a trace means the feature extractor is broken, and a model fitted around it hides that.
 */
export function checkDataset(who: string, X: readonly FeatureRow[], y: ArrayLike<number>): number {
  if (X.length === 0) throw new RangeError(`${who}: expected at least one row, got 0`);
  if (X.length !== y.length) throw new RangeError(`${who}: expected one target per row (${X.length} rows), got ${y.length} targets`);
  const numFeatures = X[0]!.length;
  if (numFeatures < 1) throw new RangeError(`${who}: expected at least one feature per row, got 0`);
  for (let i = 0; i < X.length; i++) {
    const row = X[i]!;
    if (row.length !== numFeatures) throw new RangeError(`${who}: expected ${numFeatures} features in every row, got ${row.length} in row ${i}`);
    for (let f = 0; f < numFeatures; f++) {
      if (!Number.isFinite(row[f])) throw new RangeError(`${who}: expected finite features, got ${row[f]} at row ${i}, feature ${f}`);
    }
    if (!Number.isFinite(y[i])) throw new RangeError(`${who}: expected finite targets, got ${y[i]} at row ${i}`);
  }
  return numFeatures;
}

/** Validates an integer option in [min, max]. */
export function checkInt(who: string, name: string, v: unknown, min: number, max: number): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) {
    throw new RangeError(`${who}: expected ${name} to be an integer in [${min}, ${max}], got ${String(v)}`);
  }
  return v;
}

/** Validates a real option in [min, max]. */
export function checkReal(who: string, name: string, v: unknown, min: number, max: number): number {
  if (typeof v !== 'number' || !Number.isFinite(v) || v < min || v > max) {
    throw new RangeError(`${who}: expected ${name} to be a number in [${min}, ${max}], got ${String(v)}`);
  }
  return v;
}
