// One interface for the calibrators the controller holds at run time, and the factory that builds
// one per mode:
//
//   static   the offline calibration set, never updated: the finite-sample guarantee, and blind to drift;
//   rolling  the last N observed scores, recalibrated at the fixed α (follows drift within ~N outcomes);
//   aci      adaptive conformal inference (Gibbs & Candès 2021): the working level moves online,
//            α_{t+1} = α_t + γ(α − err_t), over a window of recent scores. Long-run miss rate → α
//            under arbitrary shift; the per-request finite-sample guarantee is given up.
//
// Censoring — what "observed" means here. Only admitted requests come back with a latency, so every
// online mode calibrates on the admitted sub-population, i.e. on outcomes conditional on the
// controller's own choices. That is the quantity the SLO promise is about (P(y ≤ U | admitted)), but
// it is not exchangeable with the refused requests, and it moves when the policy moves: the
// reference measured admitted requests beating their bounds far more often than promised, because
// shedding emptied the engine they ran on. Consequences: (1) the online miss rate is an estimate for
// admitted traffic only; (2) rolling and ACI drift looser as the controller succeeds (ACI's level is
// clipped above, by default at 5α, so that feedback cannot relax the bound without limit);
// (3) outcomes arrive at completion, so at any instant the slowest admitted requests are the ones
// not yet observed — the window leans fast. A request abandoned or timed out should be observed with
// y = its elapsed time: a lower bound, and under a one-sided score an elapsed time already past the
// bound is a miss whatever the true latency was. Dropping it would hide exactly the misses.
//
// Cost on the decision path: bound() is O(1) (a rank, an array read, an O(1) inverse); observe() is
// O(log N + N) memmove in the window (sorted-window.ts). Measured in bench/admission/conformal-cost.ts.

import { AciCalibrator } from './aci-calibrator.ts';
import type { Observation, UncalibratedReason } from './quantile.ts';
import { RollingCalibrator } from './rolling-calibrator.ts';
import type { Score } from './score.ts';
import { StaticCalibrator } from './static-calibrator.ts';

export type CalibratorMode = 'static' | 'rolling' | 'aci';

/** An upper latency bound for one prediction, or why there is none. */
export type OnlineBound =
  | { readonly status: 'calibrated'; /** U = g(ŷ, q̂); +∞ when the working level is past what the window can certify. */ readonly upper: number }
  | { readonly status: 'uncalibrated'; readonly reason: UncalibratedReason };

/** What /stats shows. */
export interface CalibratorState {
  readonly mode: CalibratorMode;
  /** The score's name. */
  readonly score: string;
  /** Scores the quantile is taken over now. */
  readonly n: number;
  /** The target miscoverage. */
  readonly alpha: number;
  /** The level the quantile is taken at now (= alpha except under ACI). */
  readonly workingAlpha: number;
  /** The current conformal quantile (+∞ under ACI when the window cannot certify the working level; JSON shows that as null); null while uncalibrated. */
  readonly q: number | null;
  readonly status: 'calibrated' | 'uncalibrated';
  /** Outcomes observed, and how many exceeded the bound in force when they were observed. */
  readonly numObserved: number;
  readonly numMisses: number;
}

export interface OnlineCalibrator {
  readonly mode: CalibratorMode;
  /** The bound for a new prediction. O(1); never sorts. */
  bound(yhat: number, aux?: number): OnlineBound;
  /** An admitted request's outcome (see the censoring note above). */
  observe(yhat: number, y: number, aux?: number): void;
  state(): CalibratorState;
}

interface CommonConfig {
  readonly score: Score;
  /** Target miscoverage in (0, 1). */
  readonly alpha: number;
  /** Small-n guard; 100 by default. */
  readonly minN?: number;
  /** Offline calibration pairs to start from (the calibration fold). */
  readonly initial?: readonly Observation[];
}

export type OnlineCalibratorConfig =
  | (CommonConfig & { readonly mode: 'static' })
  | (CommonConfig & {
      readonly mode: 'rolling';
      /** Scores kept; 512 by default (the reference's window). At most 100,000. */
      readonly window?: number;
    })
  | (CommonConfig & {
      readonly mode: 'aci';
      readonly window?: number;
      /** ACI step γ; 0.005 by default. */
      readonly gamma?: number;
      /** Range the working α is clipped to; [α/50, min(0.5, 5α)] by default. */
      readonly alphaRange?: readonly [number, number];
    });

export function createOnlineCalibrator(config: OnlineCalibratorConfig): OnlineCalibrator {
  switch (config.mode) {
    case 'static':
      return new StaticCalibrator(config);
    case 'rolling':
      return new RollingCalibrator(config);
    case 'aci':
      return new AciCalibrator(config);
    default:
      throw new RangeError(`createOnlineCalibrator: expected mode static, rolling or aci, got ${String((config as { mode: unknown }).mode)}`);
  }
}
