// Pre-binning for histogram splits: each feature's values are cut into at most `maxBins` bins at
// quantiles of the training column, and the training matrix becomes one byte per cell.
//
// A feature's bins are defined by ascending thresholds t_0 < t_1 < … < t_{B−2}:
//
//   bin(v) = #{ b : t_b < v }        so   bin(v) ≤ b  ⇔  v ≤ t_b
//
// That equivalence is the invariant the whole module exists for: a split found on bins
// ("bin ≤ b goes left") is the same split as the real-valued test the model stores and predict
// runs ("x ≤ t_b goes left"), so predict never bins.
//
// Thresholds sit halfway between two adjacent distinct training values, so tied values always
// share a bin and an unseen value between them goes to the nearer side. A column with ≤ maxBins
// distinct values gets one bin per value; a constant column gets one bin and no thresholds (it can
// never be split on). Heavy ties give fewer bins than asked for, never an empty one.
//
// Layout: the bin matrix is row-major, bins[row · numFeatures + f], so building a node's
// histogram reads each sampled row's bytes contiguously.
//
// Complexity: fitBinEdges O(n log n) per feature; binMatrix O(n · F · log B); binOf O(log B).

import type { FeatureRow } from './predictor.ts';
import { checkInt } from './quantile.ts';

/** Most bins a feature may have: a bin index must fit in a byte. */
export const MAX_BINS = 256;

/** Per feature, the ascending thresholds between its bins (numBins = thresholds.length + 1). */
export type BinEdges = readonly Float64Array[];

/** Cuts each column of X into at most `maxBins` bins at quantiles of its values. */
export function fitBinEdges(X: readonly FeatureRow[], numFeatures: number, maxBins: number): BinEdges {
  checkInt('fitBinEdges', 'maxBins', maxBins, 2, MAX_BINS);
  const column = new Float64Array(X.length);
  const edges: Float64Array[] = [];
  for (let f = 0; f < numFeatures; f++) {
    for (let i = 0; i < X.length; i++) column[i] = X[i]![f]!;
    edges.push(columnEdges(column.slice().sort(), maxBins));
  }
  return edges;
}

/** Number of thresholds strictly below v: the bin v falls in. Binary search, no allocation. */
export function binOf(thresholds: Float64Array, v: number): number {
  let lo = 0;
  let hi = thresholds.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (thresholds[mid]! < v) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** The row-major bin matrix of X under `edges`. */
export function binMatrix(X: readonly FeatureRow[], edges: BinEdges): Uint8Array {
  const numFeatures = edges.length;
  const bins = new Uint8Array(X.length * numFeatures);
  for (let i = 0; i < X.length; i++) {
    const row = X[i]!;
    for (let f = 0; f < numFeatures; f++) bins[i * numFeatures + f] = binOf(edges[f]!, row[f]!);
  }
  return bins;
}

/** Thresholds for one sorted column. */
function columnEdges(sorted: Float64Array, maxBins: number): Float64Array {
  const n = sorted.length;
  // Distinct values and how many rows are ≤ each.
  const distinct: number[] = [];
  const cumulative: number[] = [];
  for (let i = 0; i < n; i++) {
    if (i + 1 === n || sorted[i + 1] !== sorted[i]) {
      distinct.push(sorted[i]!);
      cumulative.push(i + 1);
    }
  }
  const thresholds: number[] = [];
  if (distinct.length <= maxBins) {
    for (let j = 0; j + 1 < distinct.length; j++) thresholds.push(midpoint(distinct[j]!, distinct[j + 1]!));
    return Float64Array.from(thresholds);
  }
  // Cut after the first distinct value whose cumulative count reaches each target rank k·n/B.
  let j = 0;
  for (let k = 1; k < maxBins; k++) {
    const rank = (k * n) / maxBins;
    while (j + 1 < distinct.length && cumulative[j]! < rank) j++;
    if (j + 1 >= distinct.length) break; // the rest of the column is one tied value
    const t = midpoint(distinct[j]!, distinct[j + 1]!);
    if (thresholds.length === 0 || t > thresholds[thresholds.length - 1]!) thresholds.push(t);
  }
  return Float64Array.from(thresholds);
}

/** A threshold with a ≤ t < b; a itself when the halfway point rounds onto b (adjacent doubles). */
function midpoint(a: number, b: number): number {
  const m = a + (b - a) / 2;
  return m >= a && m < b ? m : a;
}
