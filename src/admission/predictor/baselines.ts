// The two baselines the learned model must beat on bound width (cadence writeup: conformal
// calibration gives every model its nominal coverage, so coverage cannot rank them; width can).
//
// - constant: the τ-quantile of y, no features.
// - linear ("throughput arithmetic"): least squares of latency on a few named columns (prefill
//   tokens, requested tokens, tokens queued ahead …) with an intercept, i.e. fitted rates rather
//   than guessed ones, then shifted by the τ-quantile of its residuals so it estimates the same
//   quantity the GBDT does.
//
// Both are plain data (serialisable as they are) and predict in O(k) without allocating.
// Complexity: fitConstantQuantile O(n log n); fitLinearQuantile O(n·k² + k³ + n log n).

import { accumulate, solveRidge } from '../../util/linsolve.ts';
import type { ConstantModel, FeatureRow, LinearQuantileModel } from './predictor.ts';
import { checkDataset, checkQuantile, checkReal, quantileInPlace } from './quantile.ts';

/** Most columns the linear baseline takes (the normal equations are (k+1)²). */
export const MAX_LINEAR_COLUMNS = 8;

export interface LinearQuantileOptions {
  readonly quantile: number;
  /** Feature indices to regress on, distinct, at most MAX_LINEAR_COLUMNS. */
  readonly columns: readonly number[];
  /** Relative ridge λ (see util/linsolve.ts); 1e-9 by default, enough only to survive a constant column. */
  readonly ridge?: number;
}

export function fitConstantQuantile(X: readonly FeatureRow[], y: ArrayLike<number>, quantile: number): ConstantModel {
  checkQuantile('fitConstantQuantile', quantile);
  const numFeatures = checkDataset('fitConstantQuantile', X, y);
  return { kind: 'constant', quantile, numFeatures, value: quantileInPlace(Float64Array.from(y), y.length, quantile) };
}

export function predictConstant(model: ConstantModel): number {
  return model.value;
}

/** Validates the linear options against a row width; returns the ridge. */
export function checkLinearOptions(who: string, options: LinearQuantileOptions, numFeatures: number): number {
  checkQuantile(who, options.quantile);
  const { columns } = options;
  if (!Array.isArray(columns) || columns.length > MAX_LINEAR_COLUMNS) {
    throw new RangeError(`${who}: expected at most ${MAX_LINEAR_COLUMNS} columns, got ${String(columns)}`);
  }
  for (const c of columns) {
    if (!Number.isInteger(c) || c < 0 || c >= numFeatures) throw new RangeError(`${who}: expected column indices in [0, ${numFeatures}), got ${c}`);
  }
  if (new Set(columns).size !== columns.length) throw new RangeError(`${who}: expected distinct columns, got [${columns.join(', ')}]`);
  return checkReal(who, 'ridge', options.ridge ?? 1e-9, 0, 1e6);
}

/**
 * Least squares on the rows' sums, then the residual shift. Returns null when the solve fails
 * (only with ridge 0 and collinear columns), an expected outcome of bad data rather than a bug.
 */
export function fitLinearQuantile(X: readonly FeatureRow[], y: ArrayLike<number>, options: LinearQuantileOptions): LinearQuantileModel | null {
  const numFeatures = checkDataset('fitLinearQuantile', X, y);
  const ridge = checkLinearOptions('fitLinearQuantile', options, numFeatures);
  const { columns, quantile } = options;
  const k = columns.length + 1;
  const A = new Float64Array(k * k);
  const b = new Float64Array(k);
  const z = new Float64Array(k);
  for (let i = 0; i < X.length; i++) {
    design(X[i]!, columns, z);
    accumulate(A, b, z, 0, k, y[i]!, 1);
  }
  const beta = new Float64Array(k);
  if (!solveRidge(A, b, k, ridge, beta, new Float64Array(k * k + k))) return null;
  const residuals = new Float64Array(X.length);
  for (let i = 0; i < X.length; i++) residuals[i] = y[i]! - linear(beta, columns, X[i]!);
  return linearModel(quantile, numFeatures, columns, beta, quantileInPlace(residuals, X.length, quantile));
}

export function predictLinear(model: LinearQuantileModel, x: FeatureRow): number {
  const { columns, coefficients } = model;
  let sum = model.intercept + model.shift;
  for (let j = 0; j < columns.length; j++) sum += coefficients[j]! * x[columns[j]!]!;
  return sum;
}

/** z = (1, x[columns[0]], x[columns[1]], …). */
export function design(x: FeatureRow, columns: readonly number[], z: Float64Array): void {
  z[0] = 1;
  for (let j = 0; j < columns.length; j++) z[j + 1] = x[columns[j]!]!;
}

/** β₀ + Σ β_j · x[columns[j−1]]. */
export function linear(beta: Float64Array, columns: readonly number[], x: FeatureRow): number {
  let sum = beta[0]!;
  for (let j = 0; j < columns.length; j++) sum += beta[j + 1]! * x[columns[j]!]!;
  return sum;
}

export function linearModel(quantile: number, numFeatures: number, columns: readonly number[], beta: Float64Array, shift: number): LinearQuantileModel {
  const plain = (v: number): number => (v === 0 ? 0 : v); // no −0: it would not survive JSON
  return {
    kind: 'linear',
    quantile,
    numFeatures,
    columns: [...columns],
    intercept: plain(beta[0]!),
    coefficients: Array.from(beta.subarray(1), plain),
    shift: plain(shift),
  };
}
