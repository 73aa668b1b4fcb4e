// The predictors' shared vocabulary: a feature row, the one interface the controller calls, and
// the serialisable model forms. Predictors are feature-agnostic: a row is a vector of numbers in
// an order the caller fixes (the artifact records the names), and nothing here knows what a
// column means.
//
// Every model predicts a τ-quantile of latency. τ is the BASE level, not the guarantee: fit it
// where the data are dense (about 0.9) and let the conformal step inflate the bound to 1 − α.
// Fitting at the guarantee level (0.99) leaves a handful of rows above the quantile and the model
// flattens into a constant (cadence writeup, "the base quantile level is not the guarantee level").
//
// Model objects are plain readonly data (typed arrays where the hot path reads them); `toPredictor`
// turns any of them into a QuantilePredictor. Predict is O(size of the model) and allocates nothing.

import { predictGbdt } from './gbdt.ts';
import { predictConstant, predictLinear } from './baselines.ts';

/** One feature vector, in the column order the model was fitted with. */
export type FeatureRow = Float64Array | readonly number[];

/** What the admission controller holds: x ↦ an estimate of the τ-quantile of latency. */
export interface QuantilePredictor {
  /** The quantile level τ in (0, 1) the model estimates. */
  readonly quantile: number;
  /** Allocation-free; `x` must have at least the model's number of features. */
  predict(x: FeatureRow): number;
}

/**
 * Gradient-boosted trees, all trees' nodes in flat arrays (pre-order within a tree, so every
 * child index is greater than its parent's):
 *
 *   node k:  feature[k] ≥ 0 → internal: go to left[k] if x[feature[k]] <= threshold[k], else right[k]
 *            feature[k] = −1 → leaf: add value[k] (learning rate already folded in)
 *   F(x) = base + Σ_t value[leaf_t(x)];   prediction = F(x), or expm1(F(x)) when target = 'log1p'
 *
 * A NaN feature fails every `<=` and goes right.
 */
export interface GbdtModel {
  readonly kind: 'gbdt';
  readonly quantile: number;
  readonly numFeatures: number;
  /** Space the trees were fitted in; 'log1p' fits log1p(y) and predicts expm1 (quantiles commute with monotone maps). */
  readonly target: 'identity' | 'log1p';
  /** F0: the τ-quantile of the (transformed) training targets. */
  readonly base: number;
  /** Index of each tree's root node. */
  readonly roots: Int32Array;
  readonly feature: Int32Array;
  readonly threshold: Float64Array;
  readonly left: Int32Array;
  readonly right: Int32Array;
  readonly value: Float64Array;
  /** Total split gain per feature (in the loss's gradient units), for reporting importance. */
  readonly featureGain: Float64Array;
}

/** "Throughput arithmetic": least squares on a few columns, shifted to the τ-quantile of its residuals. */
export interface LinearQuantileModel {
  readonly kind: 'linear';
  readonly quantile: number;
  readonly numFeatures: number;
  /** Feature indices used, in coefficient order. */
  readonly columns: readonly number[];
  readonly intercept: number;
  /** One per column. */
  readonly coefficients: readonly number[];
  /** τ-quantile of the least-squares residuals y − (intercept + Σ c·x), added to every prediction. */
  readonly shift: number;
}

/** No features: the τ-quantile of the training targets. */
export interface ConstantModel {
  readonly kind: 'constant';
  readonly quantile: number;
  readonly numFeatures: number;
  readonly value: number;
}

export type PredictorModel = GbdtModel | LinearQuantileModel | ConstantModel;

/** Wraps a model as the controller's interface. */
export function toPredictor(model: PredictorModel): QuantilePredictor {
  switch (model.kind) {
    case 'gbdt':
      return { quantile: model.quantile, predict: (x) => predictGbdt(model, x) };
    case 'linear':
      return { quantile: model.quantile, predict: (x) => predictLinear(model, x) };
    case 'constant':
      return { quantile: model.quantile, predict: () => predictConstant(model) };
  }
}
