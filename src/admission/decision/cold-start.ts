// The cold-start rule's safety factor, learned from its own outcomes.
//
// Until the bound is calibrated (fewer admitted outcomes than the small-n guard, 100), a request is
// admitted when the throughput arithmetic — the prompt work ahead of it and its own prefill at the
// measured prefill rate, plus its planned output length at the measured step time — times a safety
// factor fits its budget (conformal-controller.ts). A fixed factor is a guess: 2 was safe with
// outputs run to max_tokens, and far too cautious when outputs end at EOS and the planned length is
// the 90th percentile of a geometric one (a fresh server then refused most of what it could serve).
//
// So the factor is calibrated like the bound, only sooner. The estimate ŷ = P + D has two parts:
// P, the prompt work ahead of the request and its own prefill at the measured prefill rate — known
// up to that rate — and D, the planned output at the measured step time, which holds everything
// nobody knows at the decision (where the output ends, what arrives beside it). Each admitted
// outcome scores (y − P) / max(D, B/4): its E2E latency past the prefill part, over the decode
// part. Once there are enough scores for the conformal rank to exist (19 for a 95% guarantee, 99
// for 99%) the factor q is their ⌈(n+1)(1−α)⌉-th smallest, the split-conformal quantile, and a
// request fits when P + q · max(D, B/4) ≤ B: it finishes inside its budget with probability ≥ 1−α
// when its score is exchangeable with the recent ones (any fixed function of what is known at the
// decision keeps that; the score is increasing in y). Before that, the fixed factor on the whole
// estimate. The window keeps the newest scores only: the rule decides at most until the bound
// takes over, and the load it admits into drifts as it learns.
//
// Why not one factor on the whole estimate (y / ŷ, the score before): it multiplied the prefill
// part by a spread that comes from the decode part. On long prompts below saturation (½×
// long-natural) a 2,700-token prompt, 1.6 s of prefill with a 1.7 s planned output, was refused
// at 1.25 × 3.3 s = 4.2 s against a 4 s budget — a request that could not miss it with every
// output token at the cap — and 12 of 98 requests were refused where admission off served 99%
// inside (results/admission/protect-long-half).
//
// The same scores make a second E2E bound once the learned one is calibrated, with
// --admission-arithmetic-bound on: P + q' · max(D, B/4), q' their quantile at half the
// miscoverage, and the bound in force is the lesser of it and the learned one at half the
// miscoverage too. The lesser of two upper bounds, each missing with probability ≤ α/2, misses with
// probability ≤ α (Bonferroni): it keeps the guarantee and takes whichever bound is tighter for
// this request — the arithmetic, a product of length and step time, where the learned additive
// model misses the interaction (an idle engine after an overload: measured on chat-natural,
// docs/admission.md).
//
// The decode part in a score is floored at a quarter of the request's budget. Without the floor a
// tiny request — a one-token probe the arithmetic puts at 10 ms, which takes 300 ms of HTTP,
// tokenizing and waiting for a step — scored 30 and set the factor for everything (seen on the
// first run); the floor only stops requests far inside their budget, whose factor matters least,
// from setting it for those near it. An estimate saved without its prefill part (state written
// before it was recorded) scores with P = 0: the old ratio.
//
// Censoring: a request cut (cancelled, timed out, failed) past its budget scores +∞ — a miss,
// whatever its true latency; one cut before its budget scores its latency at the cut, a lower bound
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

  /**
   * Whether a request whose unmargined arithmetic estimate is `estimateMs`, `prefillMs` of it the
   * prefill part (the prompt work ahead and its own), fits `budgetMs`. O(1).
   */
  fits(estimateMs: number, budgetMs: number, prefillMs = 0): boolean {
    if (this.#size < this.#minN) return COLD_START_MARGIN * estimateMs <= budgetMs;
    return bound(this.#margin, estimateMs, budgetMs, prefillMs) <= budgetMs;
  }

  /** The arithmetic bound at half the miscoverage for this estimate and budget, ms; null until its rank exists. O(1). */
  halfBound(estimateMs: number, budgetMs: number, prefillMs = 0): number | null {
    return this.#halfMargin === null ? null : bound(this.#halfMargin, estimateMs, budgetMs, prefillMs);
  }

  /**
   * One admitted outcome: its unmargined arithmetic estimate at decision (null: none) and the
   * prefill part of it, its E2E latency (the cut time when censored) and its E2E budget.
   * O(w log w), w the window (100 at α ≥ 0.05).
   */
  observe(estimateMs: number | null, e2eMs: number, censored: boolean, budgetMs: number, prefillMs = 0): void {
    if (estimateMs === null || !(estimateMs > 0) || !(e2eMs >= 0)) return;
    const p = prefillPart(estimateMs, prefillMs);
    const score = censored && e2eMs > budgetMs ? Infinity : (e2eMs - p) / Math.max(estimateMs - p, FLOOR_SHARE * budgetMs);
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

/** The prefill part of an estimate as a score reads it: within [0, estimate]; 0 when unknown. */
function prefillPart(estimateMs: number, prefillMs: number): number {
  return Number.isFinite(prefillMs) ? Math.min(Math.max(prefillMs, 0), estimateMs) : 0;
}

/** prefill + q · max(the rest, a quarter of the budget): the bound a factor q makes of an estimate. */
function bound(q: number, estimateMs: number, budgetMs: number, prefillMs: number): number {
  const p = prefillPart(estimateMs, prefillMs);
  return p + q * Math.max(estimateMs - p, FLOOR_SHARE * budgetMs);
}
