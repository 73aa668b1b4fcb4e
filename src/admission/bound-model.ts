// One latency target (E2E or TTFT) as the controller holds it: a base quantile predictor turned
// into an upper bound by an online conformal calibrator, fed back with every admitted outcome.
//
//   predict(features) → ŷ (ms)      the base model: an offline artifact, or the online throughput
//                                   baseline refitted as outcomes arrive (the default before any
//                                   artifact exists; null until it has enough outcomes to fit)
//   bound(ŷ) → U (ms) | uncalibrated the calibrator's conformal bound
//   observe(features, ŷ, y)          the outcome: calibrator score, and the online model's data
//
// Decision cost: predict + bound, O(trees · depth) or O(k), allocation-free (measured in
// bench/admission/). Refits run on the outcome path, never on the decision path.

import type { OnlineBound, OnlineCalibrator } from './conformal/online-calibrator.ts';
import type { OnlineLinearQuantile } from './predictor/online-linear.ts';
import type { QuantilePredictor } from './predictor/predictor.ts';

/** Observations between two refits of the online baseline. */
const REFIT_EVERY = 8;

export type BasePredictor = { readonly kind: 'artifact'; readonly predictor: QuantilePredictor; readonly description: string } | { readonly kind: 'online'; readonly model: OnlineLinearQuantile };

export interface BoundModelState {
  readonly predictor: string;
  /** Outcomes behind the online baseline (null for an artifact). */
  readonly numPredictorOutcomes: number | null;
  readonly calibration: ReturnType<OnlineCalibrator['state']>;
}

export class BoundModel {
  #base: BasePredictor;
  #calibrator: OnlineCalibrator;
  #sinceRefit = 0;

  constructor(base: BasePredictor, calibrator: OnlineCalibrator) {
    this.#base = base;
    this.#calibrator = calibrator;
  }

  /** The predictor in place now (the self-trainer compares a new one against it on held-out outcomes). */
  get base(): BasePredictor {
    return this.#base;
  }

  /**
   * Replace the predictor and its calibration together (a self-trained model and the scores of its
   * held-out rows, self-train/self-trainer.ts). Between two decisions: JavaScript runs one at a time,
   * so no decision ever sees one without the other.
   */
  swap(base: BasePredictor, calibrator: OnlineCalibrator): void {
    this.#base = base;
    this.#calibrator = calibrator;
    this.#sinceRefit = 0;
  }

  /** The base prediction, ms; null while the online baseline has not been fitted yet. */
  predict(features: Float64Array): number | null {
    if (this.#base.kind === 'artifact') return Math.max(0, this.#base.predictor.predict(features));
    return this.#base.model.ready ? Math.max(0, this.#base.model.predict(features)) : null;
  }

  bound(yhat: number | null): OnlineBound {
    if (yhat === null) return { status: 'uncalibrated', reason: 'below_min_n' };
    return this.#calibrator.bound(yhat);
  }

  /**
   * An admitted request's outcome. `yhat` is what predict() said at its decision (null: no model
   * then, so nothing to score); `y` its latency, or the elapsed time when `censored` (a lower bound:
   * it scores a miss if it already passed the bound, and is never fitted as an observed latency).
   */
  observe(features: Float64Array, yhat: number | null, y: number, censored: boolean): void {
    if (yhat !== null) this.#calibrator.observe(yhat, y);
    if (censored || this.#base.kind !== 'online') return;
    const m = this.#base.model;
    m.observe(features, y);
    if (++this.#sinceRefit >= REFIT_EVERY || !m.ready) {
      this.#sinceRefit = 0;
      m.refit();
    }
  }

  state(): BoundModelState {
    const b = this.#base;
    return {
      predictor: b.kind === 'artifact' ? b.description : `online throughput baseline (τ=${b.model.quantile})`,
      numPredictorOutcomes: b.kind === 'online' ? b.model.numObservations : null,
      calibration: this.#calibrator.state(),
    };
  }
}
