// The throughput-arithmetic baseline, refitted as outcomes arrive: the server's predictor before
// any offline artifact exists. It keeps the normal-equation sums XᵀX and Xᵀy of the last
// `windowSize` outcomes, so an observation is O(k²) and a refit solves a k × k system (k =
// columns + 1 ≤ 9) in O(k³), plus O(W log W) for the residual quantile that sets the shift.
//
// Window: a ring buffer of the last W (design row, latency) pairs. Observing into a full window
// subtracts the evicted row's contribution from the sums before adding the new one. Adding and
// subtracting accumulate rounding, so every W evictions the sums are rebuilt from the buffer in
// arrival order, which bounds the drift and makes them equal, bit for bit, to the sums a batch
// fit over the same rows computes at that point.
//
// Invariant: a refit over the window gives what fitLinearQuantile gives on the same rows
// (test/admission/predictor/online-linear.test.ts checks 1e-9 relative).
//
// `predict` before the first successful refit is a bug: callers check `ready` and fall back.

import { accumulate, solveRidge } from '../../util/linsolve.ts';
import { checkLinearOptions, design, linear, linearModel, type LinearQuantileOptions } from './baselines.ts';
import type { FeatureRow, LinearQuantileModel, QuantilePredictor } from './predictor.ts';
import { checkInt, quantileInPlace } from './quantile.ts';
import { bug } from '../../util/bug.ts';

export interface OnlineLinearOptions extends LinearQuantileOptions {
  /** Width of the rows the model is fed (the feature vector's length). */
  readonly numFeatures: number;
  /** Outcomes kept; at least columns + 2. */
  readonly windowSize: number;
  /**
   * Outcomes needed before a refit succeeds; columns + 2 (one more than the coefficients) by
   * default, at most windowSize. A fit of k coefficients on barely k rows predicts anything off them.
   */
  readonly minRows?: number;
}

export class OnlineLinearQuantile implements QuantilePredictor {
  readonly quantile: number;
  readonly #numFeatures: number;
  readonly #columns: readonly number[];
  readonly #ridge: number;
  readonly #k: number;
  readonly #window: number;
  readonly #minRows: number;
  // Ring buffer: row r's design vector at #rowsZ[r·k, (r+1)·k), its latency at #rowsY[r].
  readonly #rowsZ: Float64Array;
  readonly #rowsY: Float64Array;
  #next = 0; // slot the next observation goes to (the oldest row once full)
  #count = 0;
  #evictionsSinceRebuild = 0;
  readonly #A: Float64Array;
  readonly #b: Float64Array;
  readonly #z: Float64Array;
  readonly #scratch: Float64Array;
  readonly #residuals: Float64Array;
  // The fitted model: β (intercept first) and the residual shift; #fitted false until a refit succeeds.
  readonly #beta: Float64Array;
  /** β being solved for; copied into #beta only when the solve succeeds. */
  readonly #candidate: Float64Array;
  #shift = 0;
  #fitted = false;

  constructor(options: OnlineLinearOptions) {
    const who = 'OnlineLinearQuantile';
    this.#numFeatures = checkInt(who, 'numFeatures', options.numFeatures, 1, 1e6);
    this.#ridge = checkLinearOptions(who, options, this.#numFeatures);
    this.quantile = options.quantile;
    this.#columns = [...options.columns];
    this.#k = this.#columns.length + 1;
    this.#window = checkInt(who, 'windowSize', options.windowSize, this.#k + 1, 1e7);
    this.#minRows = checkInt(who, 'minRows', options.minRows ?? this.#k + 1, this.#k + 1, this.#window);
    const k = this.#k;
    this.#rowsZ = new Float64Array(this.#window * k);
    this.#rowsY = new Float64Array(this.#window);
    this.#A = new Float64Array(k * k);
    this.#b = new Float64Array(k);
    this.#z = new Float64Array(k);
    this.#scratch = new Float64Array(k * k + k);
    this.#residuals = new Float64Array(this.#window);
    this.#beta = new Float64Array(k);
    this.#candidate = new Float64Array(k);
  }

  /** Outcomes in the window. */
  get numObservations(): number {
    return this.#count;
  }

  /** True once a refit has succeeded; predict is valid from then on. */
  get ready(): boolean {
    return this.#fitted;
  }

  /**
   * Records one outcome: O(k²), no allocation. A non-finite feature or latency is refused (false):
   * one bad trace row must not poison the sums for the rest of the window.
   */
  observe(x: FeatureRow, latency: number): boolean {
    if (x.length < this.#numFeatures) bug(`OnlineLinearQuantile.observe with ${x.length} features, expected ${this.#numFeatures}`);
    const z = this.#z;
    design(x, this.#columns, z);
    if (!Number.isFinite(latency)) return false;
    for (let j = 0; j < this.#k; j++) if (!Number.isFinite(z[j])) return false;
    const k = this.#k;
    const slot = this.#next;
    if (this.#count === this.#window) {
      accumulate(this.#A, this.#b, this.#rowsZ, slot * k, k, this.#rowsY[slot]!, -1);
      this.#evictionsSinceRebuild++;
    } else {
      this.#count++;
    }
    this.#rowsZ.set(z, slot * k);
    this.#rowsY[slot] = latency;
    this.#next = (slot + 1) % this.#window;
    if (this.#evictionsSinceRebuild >= this.#window) this.#rebuild();
    else accumulate(this.#A, this.#b, z, 0, k, latency, 1);
    return true;
  }

  /** Refits β and the shift on the window; false (model unchanged) with fewer than minRows rows or a degenerate window. */
  refit(): boolean {
    if (this.#count < this.#minRows) return false;
    const beta = this.#candidate;
    if (!solveRidge(this.#A, this.#b, this.#k, this.#ridge, beta, this.#scratch)) return false;
    const k = this.#k;
    const start = this.#oldest();
    for (let i = 0; i < this.#count; i++) {
      const r = (start + i) % this.#window;
      let fit = 0;
      for (let j = 0; j < k; j++) fit += beta[j]! * this.#rowsZ[r * k + j]!;
      this.#residuals[i] = this.#rowsY[r]! - fit;
    }
    this.#shift = quantileInPlace(this.#residuals, this.#count, this.quantile);
    this.#beta.set(beta);
    this.#fitted = true;
    return true;
  }

  predict(x: FeatureRow): number {
    if (!this.#fitted) bug('OnlineLinearQuantile.predict before a successful refit (check ready)');
    return linear(this.#beta, this.#columns, x) + this.#shift;
  }

  /** The current fit in the offline baseline's serialisable form, or null before the first refit. */
  toModel(): LinearQuantileModel | null {
    return this.#fitted ? linearModel(this.quantile, this.#numFeatures, this.#columns, this.#beta, this.#shift) : null;
  }

  #oldest(): number {
    return this.#count === this.#window ? this.#next : 0;
  }

  /** Recomputes the sums from the buffer, oldest first (the order a batch fit adds them in). */
  #rebuild(): void {
    this.#A.fill(0);
    this.#b.fill(0);
    const k = this.#k;
    const start = this.#oldest();
    for (let i = 0; i < this.#count; i++) {
      const r = (start + i) % this.#window;
      accumulate(this.#A, this.#b, this.#rowsZ, r * k, k, this.#rowsY[r]!, 1);
    }
    this.#evictionsSinceRebuild = 0;
  }

}
