// The cold-start rule's safety factor, learned from its own outcomes.
//
// Until the bound is calibrated (fewer admitted outcomes than the small-n guard, 100), a request is
// admitted when the throughput arithmetic — the prompt work ahead of it and its own prefill at the
// measured prefill rate, plus its planned output length at the measured step time — times a safety
// factor fits its budget (conformal-controller.ts). A fixed factor is a guess: 2 was safe with
// outputs run to max_tokens, and far too cautious when outputs end at EOS and the planned length is
// the 90th percentile of a geometric one (a fresh server then refused most of what it could serve).
//
// So the factor is calibrated like the bound, only sooner: each admitted outcome's ratio of its
// E2E latency to the arithmetic's unmargined estimate at its decision is a score, and once there
// are enough of them for the conformal rank to exist (19 for a 95% guarantee, 99 for 99%) the
// factor is their ⌈(n+1)(1−α)⌉-th smallest: the split-conformal quantile, so a request admitted on
// it finishes inside its budget with probability ≥ 1−α when its ratio is exchangeable with the
// recent ones. Before that, the fixed factor. The window keeps the newest scores only: the rule
// decides at most until the bound takes over, and the load it admits into drifts as it learns.
//
// The same scores make a second E2E bound once the learned one is calibrated, with
// --admission-arithmetic-bound on: q' · max(ŷ, B/4), q' their quantile at half the miscoverage, and
// the bound in force is the lesser of it and the learned one at half the miscoverage too. The
// lesser of two upper bounds, each missing with probability ≤ α/2, misses with probability ≤ α
// (Bonferroni): it keeps the guarantee and takes whichever bound is tighter for this request —
// the arithmetic, a product of length and step time, where the learned additive model misses the
// interaction (an idle engine after an overload: measured on chat-natural, docs/admission.md).
//
// The estimate in a score is floored at a quarter of the request's budget: y / max(ŷ, B/4), and a
// request fits when q · max(ŷ, B/4) ≤ B. Without the floor a tiny request — a one-token probe the
// arithmetic puts at 10 ms, which takes 300 ms of HTTP, tokenizing and waiting for a step — scored
// 30 and set the factor for everything (seen on the first run). Any fixed function of what is known
// at the decision keeps the quantile valid; the floor only stops requests far inside their budget,
// whose factor matters least, from setting it for those near it.
//
// Censoring: a request cut (cancelled, timed out, failed) past its budget scores +∞ — a miss,
// whatever its true latency; one cut before its budget scores its ratio at the cut, a lower bound
// (as the bound's calibration scores it). Outcomes with no estimate (the engine's rates unmeasured
// at its decision) teach nothing.

import { conformalQuantile, minCalibrationSize, validateAlpha } from '../conformal/quantile.ts';

/** The factor before enough outcomes are in: looser than the shortcut's 1.5, since nothing checks it yet. */
export const COLD_START_MARGIN = 2;
/** Scores kept: the newest this many, or more when half the miscoverage needs more for its rank. */
const MIN_WINDOW = 100;
/** The estimate in a score, and in a decision once the factor is learned, is at least this share of the budget. */
const FLOOR_SHARE = 0.25;

export interface ColdStartMarginState {
  /** The factor in force. */
  readonly margin: number;
  /** Whether it is learned (else the fixed COLD_START_MARGIN). */
  readonly learned: boolean;
  /** Scores in the window. */
  readonly n: number;
  /** Scores needed before the factor is learned. */
  readonly minN: number;
  /** The factor at half the miscoverage (the arithmetic bound's), null until its rank exists. */
  readonly halfMargin: number | null;
}

export class ColdStartMargin {
  readonly #alpha: number;
  readonly #minN: number;
  readonly #minNHalf: number;
  readonly #window: number;
  readonly #ring: Float64Array;
  #next = 0;
  #size = 0;
  /** The factor from the current window, recomputed on observe (decisions read it in O(1)). */
  #margin = COLD_START_MARGIN;
  /** The quantile at α/2, for the arithmetic bound; null until its rank exists. */
  #halfMargin: number | null = null;

  constructor(alpha: number) {
    validateAlpha('ColdStartMargin', alpha);
    this.#alpha = alpha;
    this.#minN = minCalibrationSize(alpha);
    this.#minNHalf = minCalibrationSize(alpha / 2);
    this.#window = Math.max(MIN_WINDOW, this.#minNHalf);
    this.#ring = new Float64Array(this.#window);
  }

  /** Whether a request whose unmargined arithmetic estimate is `estimateMs` fits `budgetMs`. O(1). */
  fits(estimateMs: number, budgetMs: number): boolean {
    if (this.#size < this.#minN) return COLD_START_MARGIN * estimateMs <= budgetMs;
    return this.#margin * Math.max(estimateMs, FLOOR_SHARE * budgetMs) <= budgetMs;
  }

  /** The arithmetic bound at half the miscoverage for this estimate and budget, ms; null until its rank exists. O(1). */
  halfBound(estimateMs: number, budgetMs: number): number | null {
    return this.#halfMargin === null ? null : this.#halfMargin * Math.max(estimateMs, FLOOR_SHARE * budgetMs);
  }

  /**
   * One admitted outcome: its unmargined arithmetic estimate at decision (null: none), its E2E
   * latency (the cut time when censored) and its E2E budget. O(w log w), w the window (100 at α ≥ 0.05).
   */
  observe(estimateMs: number | null, e2eMs: number, censored: boolean, budgetMs: number): void {
    if (estimateMs === null || !(estimateMs > 0) || !(e2eMs >= 0)) return;
    const score = censored && e2eMs > budgetMs ? Infinity : e2eMs / Math.max(estimateMs, FLOOR_SHARE * budgetMs);
    this.#ring[this.#next] = score;
    this.#next = (this.#next + 1) % this.#window;
    if (this.#size < this.#window) this.#size++;
    if (this.#size < this.#minN) return;
    const sorted = this.#ring.slice(0, this.#size).sort();
    this.#margin = conformalQuantile(sorted, this.#alpha);
    if (this.#size >= this.#minNHalf) this.#halfMargin = conformalQuantile(sorted, this.#alpha / 2);
  }

  state(): ColdStartMarginState {
    return { margin: this.#margin, learned: this.#size >= this.#minN, n: this.#size, minN: this.#minN, halfMargin: this.#halfMargin };
  }
}
