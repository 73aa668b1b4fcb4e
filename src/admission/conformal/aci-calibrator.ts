// Adaptive conformal inference (Gibbs & Candès 2021) over a window of recent scores.
//
// After each outcome the working miscoverage moves against the error it just made:
//   α_{t+1} = clip(α_t + γ(α − err_t)),   err_t = 1 if the score exceeded q̂ at level 1−α_t, else 0.
// A miss lowers α_t by γ(1−α) (a wider bound); a hit raises it by γα. Unclipped, the long-run miss
// rate is within (max α_t − min α_t + γ)/(γT) of α for any sequence, shifted or not — traded for the
// per-request finite-sample guarantee split conformal gives under exchangeability.
//
// Why clip, and why these defaults ([α/50, min(0.5, 5α)]): below, α_t near 0 asks for a rank past n
// and the bound goes to +∞ (refuse everything; clipping bounds how long recovery from that takes);
// above, the outcomes are censored to admitted requests that tend to beat their bounds (see
// online-calibrator.ts), and each hit loosens the bound — the cap keeps that feedback from relaxing a
// 99% promise past 95%. Clipping the state itself (not just the level read from it) prevents windup.
//
// err_t is judged against q̂ in force when the outcome arrives; the decision's own bound may be a
// little older (other outcomes landed in between), a difference of a few steps of γ.
//
// γ is a timescale: at the reference's γ = 0.005 a level moves by thousandths over a few hundred
// outcomes. While the window holds fewer than minN scores no bound was in force, so α_t does not move.
//
// Complexity: bound O(1); observe O(log N + N) memmove.

import type { CalibratorState, OnlineBound, OnlineCalibrator } from './online-calibrator.ts';
import { DEFAULT_MIN_N, validateAlpha, type Observation } from './quantile.ts';
import { validateWindow } from './rolling-calibrator.ts';
import type { Score } from './score.ts';
import { SortedWindow } from './sorted-window.ts';
import { boundOf, validateCommon, windowQuantile } from './window-quantile.ts';
import { bug } from '../../util/bug.ts';

export interface AciCalibratorOptions {
  readonly score: Score;
  /** Target miscoverage. */
  readonly alpha: number;
  readonly minN?: number;
  /** Scores kept; 512 by default. */
  readonly window?: number;
  /** Step γ in (0, 1]; 0.005 by default. */
  readonly gamma?: number;
  /** Bounds on the working α, lo ≤ α ≤ hi; [α/50, min(0.5, 5α)] by default. */
  readonly alphaRange?: readonly [number, number];
  readonly initial?: readonly Observation[];
}

export class AciCalibrator implements OnlineCalibrator {
  readonly mode = 'aci' as const;
  readonly #score: Score;
  readonly #alpha: number;
  readonly #gamma: number;
  readonly #lo: number;
  readonly #hi: number;
  readonly #minN: number;
  readonly #window: SortedWindow;
  /** The working miscoverage α_t, always in [lo, hi]. */
  #alphaT: number;
  #numObserved = 0;
  #numMisses = 0;

  constructor(options: AciCalibratorOptions) {
    const { score, alpha, minN = DEFAULT_MIN_N, window = 512, gamma = 0.005, initial = [] } = options;
    validateAlpha('AciCalibrator', alpha);
    validateWindow('AciCalibrator', window);
    validateCommon('AciCalibrator', score, minN, window);
    if (!(gamma > 0 && gamma <= 1)) throw new RangeError(`AciCalibrator: expected gamma in (0, 1], got ${String(gamma)}`);
    const [lo, hi] = options.alphaRange ?? [alpha / 50, Math.min(0.5, 5 * alpha)];
    if (!(lo > 0 && lo <= alpha && alpha <= hi && hi < 1)) {
      throw new RangeError(`AciCalibrator: expected alphaRange [lo, hi] with 0 < lo ≤ alpha (${alpha}) ≤ hi < 1, got [${lo}, ${hi}]`);
    }
    this.#score = score;
    this.#alpha = alpha;
    this.#gamma = gamma;
    this.#lo = lo;
    this.#hi = hi;
    this.#minN = minN;
    this.#alphaT = alpha;
    this.#window = new SortedWindow(window);
    for (const o of initial) this.#window.push(score.score(o.yhat, o.y, o.aux));
  }

  bound(yhat: number, aux?: number): OnlineBound {
    return boundOf(this.#score, windowQuantile(this.#window, this.#alphaT, this.#minN, 'infinity'), yhat, aux);
  }

  observe(yhat: number, y: number, aux?: number): void {
    const s = this.#score.score(yhat, y, aux);
    const q = windowQuantile(this.#window, this.#alphaT, this.#minN, 'infinity');
    this.#numObserved++;
    if (typeof q === 'number') {
      const err = s > q ? 1 : 0;
      this.#numMisses += err;
      const next = this.#alphaT + this.#gamma * (this.#alpha - err);
      this.#alphaT = next < this.#lo ? this.#lo : next > this.#hi ? this.#hi : next;
    }
    this.#window.push(s);
  }

  state(): CalibratorState {
    const q = windowQuantile(this.#window, this.#alphaT, this.#minN, 'infinity');
    return {
      mode: this.mode,
      score: this.#score.name,
      n: this.#window.size,
      alpha: this.#alpha,
      workingAlpha: this.#alphaT,
      q: typeof q === 'number' ? q : null,
      status: typeof q === 'number' ? 'calibrated' : 'uncalibrated',
      numObserved: this.#numObserved,
      numMisses: this.#numMisses,
    };
  }

  checkInvariants(): void {
    if (!(this.#alphaT >= this.#lo && this.#alphaT <= this.#hi)) bug(`ACI working alpha ${this.#alphaT} outside [${this.#lo}, ${this.#hi}]`);
    this.#window.checkInvariants();
  }
}
