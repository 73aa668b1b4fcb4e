// One depth-limited regression tree grown on pre-binned features by histogram splits.
//
// The tree is loss-agnostic: it searches splits that best separate per-row pseudo-residuals
// `grad` (unit hessian), and asks the caller for each leaf's value (the booster sets it to the
// τ-quantile of the leaf's residuals). Split gain with L2 leaf regularisation λ:
//
//   gain = G_L²/(n_L + λ) + G_R²/(n_R + λ) − G²/(n + λ)      (≥ 0 for λ ≥ 0)
//
// A node splits only if it is shallower than maxDepth, both children keep ≥ minSamplesLeaf rows,
// and the best gain exceeds minGainToSplit. Ties between candidate splits go to the lowest
// feature, then the lowest bin, so growth is deterministic.
//
// Rows live in one index array that each split partitions in place (a node owns a contiguous
// range). Histograms (Σgrad and count per feature × bin) use the subtraction trick: the smaller
// child is built from its rows, the larger is parent − smaller, reusing the parent's buffer, so
// a depth-d tree keeps at most d + 1 histograms alive, drawn from a pool that lives across trees.
//
// Nodes are appended in pre-order to a NodeSink (every child index > its parent's).
//
// Complexity per tree: O(m · F) for the root histogram plus O(m · F) per level for the smaller
// children (m = sampled rows), O(F · B) per node for the split search, O(m) per level to partition.

/** Growth limits. */
export interface TreeLimits {
  readonly maxDepth: number;
  readonly minSamplesLeaf: number;
  readonly l2: number;
  readonly minGainToSplit: number;
}

/** Growable flat node arrays shared by all trees of a model. */
export class NodeSink {
  readonly feature: number[] = [];
  readonly splitBin: number[] = [];
  readonly left: number[] = [];
  readonly right: number[] = [];
  readonly value: number[] = [];
  readonly gain: number[] = [];

  get numNodes(): number {
    return this.feature.length;
  }
}

/** What one tree is grown on. */
export interface TreeData {
  /** Row-major bins, bins[row · numFeatures + f]. */
  readonly bins: Uint8Array;
  readonly numFeatures: number;
  /** Bins per feature. */
  readonly numBins: Int32Array;
  /** Pseudo-residual per row (all rows; only `rows` are read). */
  readonly grad: Float64Array;
}

/** The value of the leaf owning rows[start, end). */
export type LeafValue = (rows: Uint32Array, start: number, end: number) => number;

export class TreeGrower {
  readonly #data: TreeData;
  readonly #limits: TreeLimits;
  readonly #stride: number;
  #pool: Float64Array[] = [];
  // Best split of the node being searched (fields, not an object, so the search allocates nothing).
  #bestFeature = -1;
  #bestBin = -1;
  #bestGain = 0;

  constructor(data: TreeData, limits: TreeLimits) {
    this.#data = data;
    this.#limits = limits;
    let maxBins = 1;
    for (const b of data.numBins) maxBins = Math.max(maxBins, b);
    this.#stride = maxBins;
  }

  /** Grows a tree over rows[0, numRows) (permuting them) into `sink`; returns the root's index. */
  grow(rows: Uint32Array, numRows: number, leafValue: LeafValue, sink: NodeSink): number {
    const hist = this.#take();
    this.#accumulate(hist, rows, 0, numRows);
    const { grad } = this.#data;
    let sumGrad = 0;
    for (let i = 0; i < numRows; i++) sumGrad += grad[rows[i]!]!;
    return this.#node(rows, 0, numRows, 0, hist, sumGrad, leafValue, sink);
  }

  #node(rows: Uint32Array, start: number, end: number, depth: number, hist: Float64Array, sumGrad: number, leafValue: LeafValue, sink: NodeSink): number {
    const index = sink.numNodes;
    sink.feature.push(-1);
    sink.splitBin.push(-1);
    sink.left.push(-1);
    sink.right.push(-1);
    sink.value.push(0);
    sink.gain.push(0);
    const n = end - start;
    const { maxDepth, minSamplesLeaf } = this.#limits;
    if (depth >= maxDepth || n < 2 * minSamplesLeaf || !this.#search(hist, sumGrad, n)) {
      this.#pool.push(hist);
      const v = leafValue(rows, start, end);
      sink.value[index] = v === 0 ? 0 : v; // no −0 in a model: it would not survive JSON
      return index;
    }
    const f = this.#bestFeature;
    const bin = this.#bestBin;
    sink.feature[index] = f;
    sink.splitBin[index] = bin;
    sink.gain[index] = this.#bestGain;
    const mid = this.#partition(rows, start, end, f, bin);
    // Sums of the left child, read off the parent's histogram before it is reused.
    let leftGrad = 0;
    const base = f * this.#stride;
    for (let b = 0; b <= bin; b++) leftGrad += hist[2 * (base + b)]!;
    const small = this.#take();
    const leftIsSmall = mid - start <= end - mid;
    if (leftIsSmall) this.#accumulate(small, rows, start, mid);
    else this.#accumulate(small, rows, mid, end);
    for (let k = 0; k < hist.length; k++) hist[k] = hist[k]! - small[k]!;
    const [leftHist, rightHist] = leftIsSmall ? [small, hist] : [hist, small];
    sink.left[index] = this.#node(rows, start, mid, depth + 1, leftHist, leftGrad, leafValue, sink);
    sink.right[index] = this.#node(rows, mid, end, depth + 1, rightHist, sumGrad - leftGrad, leafValue, sink);
    return index;
  }

  /** Finds the best split of a node into the #best fields; false when no split qualifies. */
  #search(hist: Float64Array, sumGrad: number, n: number): boolean {
    const { l2, minSamplesLeaf, minGainToSplit } = this.#limits;
    const { numFeatures, numBins } = this.#data;
    const parentScore = (sumGrad * sumGrad) / (n + l2);
    this.#bestFeature = -1;
    this.#bestGain = minGainToSplit;
    for (let f = 0; f < numFeatures; f++) {
      const base = f * this.#stride;
      let gl = 0;
      let nl = 0;
      for (let b = 0; b + 1 < numBins[f]!; b++) {
        gl += hist[2 * (base + b)]!;
        nl += hist[2 * (base + b) + 1]!;
        if (nl < minSamplesLeaf) continue;
        const nr = n - nl;
        if (nr < minSamplesLeaf) break;
        const gr = sumGrad - gl;
        const gain = (gl * gl) / (nl + l2) + (gr * gr) / (nr + l2) - parentScore;
        if (gain > this.#bestGain) {
          this.#bestGain = gain;
          this.#bestFeature = f;
          this.#bestBin = b;
        }
      }
    }
    return this.#bestFeature >= 0;
  }

  /** Moves rows with bin ≤ `bin` on feature f to the front of [start, end); returns the boundary. */
  #partition(rows: Uint32Array, start: number, end: number, f: number, bin: number): number {
    const { bins, numFeatures } = this.#data;
    let i = start;
    let j = end - 1;
    for (;;) {
      while (i <= j && bins[rows[i]! * numFeatures + f]! <= bin) i++;
      while (i <= j && bins[rows[j]! * numFeatures + f]! > bin) j--;
      if (i >= j) return i;
      const t = rows[i]!;
      rows[i] = rows[j]!;
      rows[j] = t;
    }
  }

  /** Zeroes `hist` and fills it with (Σgrad, count) per feature × bin over rows[start, end). */
  #accumulate(hist: Float64Array, rows: Uint32Array, start: number, end: number): void {
    hist.fill(0);
    const { bins, numFeatures, grad } = this.#data;
    const stride = this.#stride;
    for (let i = start; i < end; i++) {
      const row = rows[i]!;
      const g = grad[row]!;
      const offset = row * numFeatures;
      for (let f = 0; f < numFeatures; f++) {
        const k = 2 * (f * stride + bins[offset + f]!);
        hist[k] = hist[k]! + g;
        hist[k + 1] = hist[k + 1]! + 1;
      }
    }
  }

  #take(): Float64Array {
    return this.#pool.pop() ?? new Float64Array(2 * this.#data.numFeatures * this.#stride);
  }
}
