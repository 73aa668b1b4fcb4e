// Rolling recalibration: the conformal quantile at the fixed level 1−α over the last N observed
// scores. It follows drift within about N outcomes and keeps split conformal's rank rule; the
// finite-sample guarantee holds only while the window is exchangeable with what comes next (see the
// censoring note in online-calibrator.ts: the window holds admitted outcomes only).
//
// N trades reaction time against noise: the reference kept 512, and measured that a three-minute run
// at 0.15–2.7 admitted requests/s barely turns such a window over — size it to the service's
// lifetime, not to a benchmark.
//
// Complexity: bound O(1) (rank + array read); observe O(log N + N) memmove (sorted-window.ts).

import type { CalibratorState, OnlineBound, OnlineCalibrator } from './online-calibrator.ts';
import { DEFAULT_MIN_N, validateAlpha, type Observation } from './quantile.ts';
import type { Score } from './score.ts';
import { SortedWindow } from './sorted-window.ts';
import { boundOf, validateCommon, windowQuantile } from './window-quantile.ts';

/**
 * The largest window accepted. observe()'s memmove is linear in N: 0.54 µs at 5,000
 * (bench/admission/conformal-cost.ts), so about 10 µs here by extrapolation — still far inside the
 * decision budget, and past it the window is memory the quantile no longer needs.
 */
export const MAX_WINDOW = 100_000;

export interface RollingCalibratorOptions {
  readonly score: Score;
  readonly alpha: number;
  readonly minN?: number;
  /** Scores kept; 512 by default. */
  readonly window?: number;
  /** Offline pairs to start from; the last `window` of them are kept. */
  readonly initial?: readonly Observation[];
}

export class RollingCalibrator implements OnlineCalibrator {
  readonly mode = 'rolling' as const;
  readonly #score: Score;
  readonly #alpha: number;
  readonly #minN: number;
  readonly #window: SortedWindow;
  #numObserved = 0;
  #numMisses = 0;

  constructor(options: RollingCalibratorOptions) {
    const { score, alpha, minN = DEFAULT_MIN_N, window = 512, initial = [] } = options;
    validateAlpha('RollingCalibrator', alpha);
    validateWindow('RollingCalibrator', window);
    validateCommon('RollingCalibrator', score, minN, window);
    this.#score = score;
    this.#alpha = alpha;
    this.#minN = minN;
    this.#window = new SortedWindow(window);
    for (const o of initial) this.#window.push(score.score(o.yhat, o.y, o.aux));
  }

  bound(yhat: number, aux?: number): OnlineBound {
    return boundOf(this.#score, windowQuantile(this.#window, this.#alpha, this.#minN, 'unattainable'), yhat, aux);
  }

  observe(yhat: number, y: number, aux?: number): void {
    const s = this.#score.score(yhat, y, aux);
    const q = windowQuantile(this.#window, this.#alpha, this.#minN, 'unattainable');
    this.#numObserved++;
    if (typeof q === 'number' && s > q) this.#numMisses++;
    this.#window.push(s);
  }

  state(): CalibratorState {
    const q = windowQuantile(this.#window, this.#alpha, this.#minN, 'unattainable');
    return {
      mode: this.mode,
      score: this.#score.name,
      n: this.#window.size,
      alpha: this.#alpha,
      workingAlpha: this.#alpha,
      q: typeof q === 'number' ? q : null,
      status: typeof q === 'number' ? 'calibrated' : 'uncalibrated',
      numObserved: this.#numObserved,
      numMisses: this.#numMisses,
    };
  }

  /** For tests: the window's own check. */
  checkInvariants(): void {
    this.#window.checkInvariants();
  }
}

export function validateWindow(who: string, window: number): void {
  if (!Number.isSafeInteger(window) || window < 1 || window > MAX_WINDOW) {
    throw new RangeError(`${who}: expected window to be an integer in [1, ${MAX_WINDOW}], got ${String(window)}`);
  }
}
