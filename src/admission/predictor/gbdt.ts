// A gradient-boosted quantile regressor: F_0 = τ-quantile of y, then each round fits a tree to
// the pinball loss's negative gradient (τ − 1{y < F}) and sets every leaf to the τ-quantile of its
// rows' residuals y − F, scaled by n/(n + λ) and the learning rate (the quantile-loss leaf
// renewal scikit-learn and LightGBM use; the gradient alone only says which side each row is on,
// so a leaf set from it would move by steps of τ regardless of the residuals' scale).
//
// Why training loss never rises without subsampling: the pinball loss is convex, each leaf's
// quantile minimises it over that leaf's rows, and scaling the step by a factor in (0, 1] lands
// between the old fit and the minimiser. test/admission/predictor/gbdt.test.ts holds it to that.
//
// Determinism: with the same data, options and seed the model is identical bit for bit (the
// subsample draws from a seeded generator; tree growth breaks ties by index).
//
// Complexity: fit O(R · (m·F·D + n·D + m log m)) for R rounds, m sampled rows, F features, depth D;
// predict O(R · D), allocation-free.

import { Rng } from '../../util/rng.ts';
import { binMatrix, fitBinEdges, MAX_BINS } from './binning.ts';
import type { FeatureRow, GbdtModel } from './predictor.ts';
import { checkDataset, checkInt, checkQuantile, checkReal, pinball, quantileInPlace } from './quantile.ts';
import { NodeSink, TreeGrower } from './tree.ts';

export interface GbdtOptions {
  /** τ, the base quantile level (about 0.9 for admission; see predictor.ts). */
  readonly quantile: number;
  /** Boosting rounds (trees); 200 by default. */
  readonly numRounds?: number;
  /** Shrinkage per tree, (0, 1]; 0.1 by default. */
  readonly learningRate?: number;
  /** Tree depth, 1–12; 4 by default. */
  readonly maxDepth?: number;
  /** Fewest rows a leaf may hold; 20 by default. */
  readonly minSamplesLeaf?: number;
  /** L2 leaf regularisation λ ≥ 0; 1 by default. */
  readonly l2?: number;
  /** Bins per feature, 2–256; 64 by default. */
  readonly maxBins?: number;
  /** Fraction of rows each tree sees, (0, 1]; 1 (no subsampling) by default. */
  readonly subsample?: number;
  /** Seed of the subsample; 0 by default. */
  readonly seed?: number;
  /** Smallest gain worth a split; 1e-9 by default. */
  readonly minGainToSplit?: number;
  /** Fit log1p(y) instead of y (targets must be > −1); 'identity' by default. */
  readonly target?: 'identity' | 'log1p';
}

export type ResolvedGbdtOptions = Required<GbdtOptions>;

/** A fitted model and what its training did. */
export interface GbdtFit {
  readonly model: GbdtModel;
  readonly options: ResolvedGbdtOptions;
  /** Mean pinball loss on the training rows (in the fitted space) after round r; [0] is F_0's. */
  readonly trainLoss: Float64Array;
}

/** Validates options and fills in defaults. */
export function resolveGbdtOptions(options: GbdtOptions): ResolvedGbdtOptions {
  const who = 'fitGbdt';
  const target = options.target ?? 'identity';
  if (target !== 'identity' && target !== 'log1p') throw new RangeError(`${who}: expected target 'identity' or 'log1p', got ${String(target)}`);
  return {
    quantile: checkQuantile(who, options.quantile),
    numRounds: checkInt(who, 'numRounds', options.numRounds ?? 200, 0, 100_000),
    learningRate: checkReal(who, 'learningRate', options.learningRate ?? 0.1, Number.MIN_VALUE, 1),
    maxDepth: checkInt(who, 'maxDepth', options.maxDepth ?? 4, 1, 12),
    minSamplesLeaf: checkInt(who, 'minSamplesLeaf', options.minSamplesLeaf ?? 20, 1, 1e9),
    l2: checkReal(who, 'l2', options.l2 ?? 1, 0, 1e12),
    maxBins: checkInt(who, 'maxBins', options.maxBins ?? 64, 2, MAX_BINS),
    subsample: checkReal(who, 'subsample', options.subsample ?? 1, Number.MIN_VALUE, 1),
    seed: checkInt(who, 'seed', options.seed ?? 0, -(2 ** 31), 2 ** 32 - 1),
    minGainToSplit: checkReal(who, 'minGainToSplit', options.minGainToSplit ?? 1e-9, 0, Infinity),
    target,
  };
}

/** Fits a quantile GBDT to rows X (all of one length, finite) and targets y. */
export function fitGbdt(X: readonly FeatureRow[], y: ArrayLike<number>, options: GbdtOptions): GbdtFit {
  const opts = resolveGbdtOptions(options);
  const numFeatures = checkDataset('fitGbdt', X, y);
  const n = X.length;
  const tau = opts.quantile;
  const target = Float64Array.from(y);
  if (opts.target === 'log1p') {
    for (let i = 0; i < n; i++) {
      if (!(target[i]! > -1)) throw new RangeError(`fitGbdt: expected targets > -1 for target 'log1p', got ${target[i]} at row ${i}`);
      target[i] = Math.log1p(target[i]!);
    }
  }

  const edges = fitBinEdges(X, numFeatures, opts.maxBins);
  const bins = binMatrix(X, edges);
  const numBins = Int32Array.from(edges, (e) => e.length + 1);
  const grad = new Float64Array(n);
  const grower = new TreeGrower({ bins, numFeatures, numBins, grad }, opts);
  const sink = new NodeSink();
  const roots: number[] = [];

  const scratch = new Float64Array(n);
  scratch.set(target);
  const base = quantileInPlace(scratch, n, tau);
  const F = new Float64Array(n).fill(base);
  const trainLoss = new Float64Array(opts.numRounds + 1);
  trainLoss[0] = loss(target, F, tau);

  // Row sample: the first m entries of `rows` after a partial Fisher–Yates shuffle of `perm`.
  const m = Math.max(1, Math.round(opts.subsample * n));
  const perm = Uint32Array.from({ length: n }, (_, i) => i);
  const rows = new Uint32Array(m);
  const rng = new Rng(opts.seed, 'gbdt-subsample');
  const shrink = opts.learningRate;
  const leafValue = (leafRows: Uint32Array, start: number, end: number): number => {
    const count = end - start;
    for (let i = start; i < end; i++) scratch[i - start] = target[leafRows[i]!]! - F[leafRows[i]!]!;
    return shrink * quantileInPlace(scratch, count, tau) * (count / (count + opts.l2));
  };

  for (let round = 0; round < opts.numRounds; round++) {
    for (let i = 0; i < n; i++) grad[i] = target[i]! < F[i]! ? tau - 1 : tau;
    if (m === n) {
      rows.set(perm);
    } else {
      for (let i = 0; i < m; i++) {
        const j = i + rng.int(n - i);
        const t = perm[i]!;
        perm[i] = perm[j]!;
        perm[j] = t;
      }
      rows.set(perm.subarray(0, m));
    }
    const root = grower.grow(rows, m, leafValue, sink);
    roots.push(root);
    for (let i = 0; i < n; i++) F[i] = F[i]! + sink.value[leafOfBins(sink, root, bins, i * numFeatures)]!;
    trainLoss[round + 1] = loss(target, F, tau);
  }

  const featureGain = new Float64Array(numFeatures);
  for (let k = 0; k < sink.numNodes; k++) {
    const f = sink.feature[k]!;
    if (f >= 0) featureGain[f] = featureGain[f]! + sink.gain[k]!;
  }
  const model: GbdtModel = {
    kind: 'gbdt',
    quantile: tau,
    numFeatures,
    target: opts.target,
    base,
    roots: Int32Array.from(roots),
    feature: Int32Array.from(sink.feature),
    threshold: Float64Array.from(sink.feature, (f, k) => (f < 0 ? 0 : edges[f]![sink.splitBin[k]!]!)),
    left: Int32Array.from(sink.left),
    right: Int32Array.from(sink.right),
    value: Float64Array.from(sink.value),
    featureGain,
  };
  return { model, options: opts, trainLoss };
}

/** F(x) in the fitted space, then back to latency. Allocation-free: locals and typed-array reads only. */
export function predictGbdt(model: GbdtModel, x: FeatureRow): number {
  const { roots, feature, threshold, left, right, value } = model;
  let sum = model.base;
  for (let t = 0; t < roots.length; t++) {
    let node = roots[t]!;
    let f = feature[node]!;
    while (f >= 0) {
      node = x[f]! <= threshold[node]! ? left[node]! : right[node]!;
      f = feature[node]!;
    }
    sum += value[node]!;
  }
  return model.target === 'log1p' ? Math.expm1(sum) : sum;
}

/** Predictions for many rows, into `out` when given (it must hold X.length values). */
export function predictGbdtBatch(model: GbdtModel, X: readonly FeatureRow[], out: Float64Array = new Float64Array(X.length)): Float64Array {
  if (out.length < X.length) throw new RangeError(`predictGbdtBatch: expected an output of at least ${X.length} values, got ${out.length}`);
  for (let i = 0; i < X.length; i++) out[i] = predictGbdt(model, X[i]!);
  return out;
}

/** Total split gain per feature and its share of the whole, in feature order. */
export function featureImportance(model: GbdtModel): { gain: number; share: number }[] {
  let total = 0;
  for (const g of model.featureGain) total += g;
  return Array.from(model.featureGain, (gain) => ({ gain, share: total > 0 ? gain / total : 0 }));
}

/** The leaf a training row reaches, walking the bin splits (the same path the thresholds give). */
function leafOfBins(sink: NodeSink, root: number, bins: Uint8Array, offset: number): number {
  let node = root;
  while (sink.feature[node]! >= 0) node = bins[offset + sink.feature[node]!]! <= sink.splitBin[node]! ? sink.left[node]! : sink.right[node]!;
  return node;
}

function loss(y: Float64Array, F: Float64Array, tau: number): number {
  let sum = 0;
  for (let i = 0; i < y.length; i++) sum += pinball(y[i]!, F[i]!, tau);
  return sum / y.length;
}
