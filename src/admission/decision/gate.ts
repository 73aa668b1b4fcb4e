// The decision itself, as a pure step over values: a calibrated bound (or why there is none), the
// request's budget, and the engine's cold/idle view in; admit or refuse with a reason out. It owns
// the two pieces of decision state (the hysteresis regime and the exploration quota) and nothing
// else — the controller supplies the bound and turns a refusal into a Refusal with Retry-After.
//
// Order: a bound that fits (under hysteresis) admits; otherwise, if the bound cannot be trusted here
// (uncalibrated, cold or idle engine: exploration.ts), a free exploration slot admits; otherwise refuse.
// Exploring never moves the hysteresis regime: it is a probe, not evidence that load fell.
// Complexity O(1).

import type { OnlineBound } from '../conformal/online-calibrator.ts';
import { ExplorationQuota, explorationReason, type ExplorationReason, type ExplorationView } from './exploration.ts';
import { Hysteresis } from './hysteresis.ts';

export type GateReason =
  /** The bound fits the budget. */
  | 'fits'
  /** Admitted on the exploration quota (see `explored`). */
  | 'explore'
  /** Admitted by the cold-start rule: no calibrated bound yet, and the throughput arithmetic times its learned factor fits (conformal-controller.ts). */
  | 'cold_start'
  /** Refused: the bound exceeds the budget. */
  | 'over_budget'
  /** Refused: the bound fits the budget but not the resume threshold while shedding. */
  | 'hysteresis'
  /** Refused: no calibrated bound and no exploration slot left. */
  | 'uncalibrated'
  /** Refused before the bound is asked: the budget is below the request's own prefill (+ one step) at measured rates (conformal-controller.ts). */
  | 'below_floor';

/** One decision, as data. */
export interface GateDecision {
  readonly admit: boolean;
  readonly reason: GateReason;
  /** The bound used, ms; null when uncalibrated. */
  readonly boundMs: number | null;
  /** Why exploring was allowed, when it was (whether or not a slot was left). */
  readonly explored: ExplorationReason | null;
}

export interface GateInput {
  readonly bound: OnlineBound;
  readonly budgetMs: number;
  readonly nowMs: number;
  /** The engine's view; null before the first snapshot (treated as cold). */
  readonly engine: ExplorationView | null;
}

export class AdmissionGate {
  readonly #hysteresis: Hysteresis;
  readonly #exploration: ExplorationQuota;

  constructor(options: { readonly hysteresis?: Hysteresis; readonly exploration?: ExplorationQuota } = {}) {
    this.#hysteresis = options.hysteresis ?? new Hysteresis();
    this.#exploration = options.exploration ?? new ExplorationQuota();
  }

  get hysteresis(): Hysteresis {
    return this.#hysteresis;
  }

  get exploration(): ExplorationQuota {
    return this.#exploration;
  }

  decide(input: GateInput): GateDecision {
    const { bound, budgetMs, nowMs, engine } = input;
    const calibrated = bound.status === 'calibrated';
    const boundMs = calibrated ? bound.upper : null;
    if (boundMs !== null && this.#hysteresis.fits(boundMs, budgetMs)) return { admit: true, reason: 'fits', boundMs, explored: null };
    const why = explorationReason(calibrated, engine);
    if (why !== null && this.#exploration.tryTake(nowMs)) return { admit: true, reason: 'explore', boundMs, explored: why };
    const reason: GateReason = boundMs === null ? 'uncalibrated' : Hysteresis.fitsBudget(boundMs, budgetMs) ? 'hysteresis' : 'over_budget';
    return { admit: false, reason, boundMs, explored: why };
  }
}
