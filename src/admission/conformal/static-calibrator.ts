// The offline calibration set, frozen: split conformal's finite-sample guarantee, exactly as long as
// new requests stay exchangeable with the calibration fold. observe() only counts misses, so /stats
// can show the guarantee failing under drift — which is the argument for rolling or ACI.
//
// Complexity: construction O(n log n); bound O(1); observe O(1).

import type { CalibratorState, OnlineBound, OnlineCalibrator } from './online-calibrator.ts';
import { DEFAULT_MIN_N, validateAlpha, type Observation, type UncalibratedReason } from './quantile.ts';
import type { Score } from './score.ts';
import { SortedWindow } from './sorted-window.ts';
import { boundOf, validateCommon, windowQuantile } from './window-quantile.ts';

export interface StaticCalibratorOptions {
  readonly score: Score;
  readonly alpha: number;
  readonly minN?: number;
  /** The calibration fold. Without it the calibrator is permanently uncalibrated. */
  readonly initial?: readonly Observation[];
}

export class StaticCalibrator implements OnlineCalibrator {
  readonly mode = 'static' as const;
  readonly #score: Score;
  readonly #alpha: number;
  readonly #n: number;
  /** q̂, or why there is none: computed once. */
  readonly #q: number | UncalibratedReason;
  #numObserved = 0;
  #numMisses = 0;

  constructor(options: StaticCalibratorOptions) {
    const { score, alpha, minN = DEFAULT_MIN_N, initial = [] } = options;
    validateAlpha('StaticCalibrator', alpha);
    validateCommon('StaticCalibrator', score, minN, Infinity);
    const window = new SortedWindow(Math.max(1, initial.length));
    for (const o of initial) window.push(score.score(o.yhat, o.y, o.aux));
    this.#score = score;
    this.#alpha = alpha;
    this.#n = window.size;
    this.#q = windowQuantile(window, alpha, minN, 'unattainable');
  }

  bound(yhat: number, aux?: number): OnlineBound {
    return boundOf(this.#score, this.#q, yhat, aux);
  }

  observe(yhat: number, y: number, aux?: number): void {
    const s = this.#score.score(yhat, y, aux);
    this.#numObserved++;
    if (typeof this.#q === 'number' && s > this.#q) this.#numMisses++;
  }

  state(): CalibratorState {
    const q = typeof this.#q === 'number' ? this.#q : null;
    return {
      mode: this.mode,
      score: this.#score.name,
      n: this.#n,
      alpha: this.#alpha,
      workingAlpha: this.#alpha,
      q,
      status: q === null ? 'uncalibrated' : 'calibrated',
      numObserved: this.#numObserved,
      numMisses: this.#numMisses,
    };
  }
}
