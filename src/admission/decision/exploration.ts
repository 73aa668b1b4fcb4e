// The warm-start exploration quota: admit a few requests per window regardless of the bound, when
// the bound cannot be trusted to describe the engine it is asked about.
//
// Why: refusing is self-confirming. The reference's 99% arm refused every arrival on an idle engine
// and stayed there: nothing admitted meant no outcomes to calibrate on, a cold prefix cache that kept
// every bound above the budget, and running averages stuck at their cold values. A strict guarantee
// needs a way out of that equilibrium; this is it, and it is bounded, so it cannot become "admit all".
// When to explore (explorationReason):
//   cold          the engine has no measured decode rate yet — the model is extrapolating;
//   idle          nothing running or waiting — an admitted request harms no one's deadline;
//   uncalibrated  the same, idle, while the calibrator has too few outcomes (or cannot certify its
//                 level) — no bound at all.
// Not while uncalibrated on a busy engine: there the cold-start rule decides (conformal-controller.ts),
// and it admits what its arithmetic says fits, which feeds the calibration. Exploring past it there
// admitted what the arithmetic had refused into a loaded engine: on long prompts at 4x saturation, 69
// of the 96 admissions of the first 180 s were such grants, and 22 of the 96 missed their budget.
//
// Quota: at most `quota` grants in any window of `windowMs` (a sliding window over the last `quota`
// grant times, a ring buffer). Complexity O(1) per call; clocks must not run backwards (a bug).

import type { EngineSnapshot } from '../../engine/snapshot.ts';
import { bug } from '../../util/bug.ts';

export type ExplorationReason = 'uncalibrated' | 'cold' | 'idle';

/** The snapshot fields that say whether the engine is cold or idle. */
export type ExplorationView = Pick<EngineSnapshot, 'numRunning' | 'numWaiting' | 'decodeTokensPerS'>;

/** Why exploring is allowed now, or null: a calibrated bound on a warm, busy engine is trusted. */
export function explorationReason(calibrated: boolean, engine: ExplorationView | null): ExplorationReason | null {
  if (engine === null || engine.decodeTokensPerS === null) return 'cold';
  if (engine.numRunning === 0 && engine.numWaiting === 0) return calibrated ? 'idle' : 'uncalibrated';
  return null;
}

export interface ExplorationQuotaOptions {
  /** Grants per window, ≥ 1; 4 by default. */
  readonly quota?: number;
  /** Window length, ms > 0; 10,000 by default. */
  readonly windowMs?: number;
}

export class ExplorationQuota {
  readonly quota: number;
  readonly windowMs: number;
  /** Times of the last `quota` grants; #next is the oldest once full. */
  readonly #grants: Float64Array;
  #next = 0;
  #numGrants = 0;
  #lastMs = -Infinity;

  constructor(options: ExplorationQuotaOptions = {}) {
    const { quota = 4, windowMs = 10_000 } = options;
    if (!Number.isSafeInteger(quota) || quota < 1) throw new RangeError(`ExplorationQuota: expected quota to be a positive integer, got ${String(quota)}`);
    if (!(windowMs > 0 && Number.isFinite(windowMs))) throw new RangeError(`ExplorationQuota: expected windowMs > 0, got ${String(windowMs)}`);
    this.quota = quota;
    this.windowMs = windowMs;
    this.#grants = new Float64Array(quota).fill(-Infinity);
  }

  /** Grants so far (for /stats). */
  get numGrants(): number {
    return this.#numGrants;
  }

  canTake(nowMs: number): boolean {
    this.#checkClock(nowMs);
    return this.#grants[this.#next]! <= nowMs - this.windowMs;
  }

  /** Takes a slot at nowMs if one is free; true when taken. */
  tryTake(nowMs: number): boolean {
    if (!this.canTake(nowMs)) return false;
    this.#grants[this.#next] = nowMs;
    this.#next = (this.#next + 1) % this.quota;
    this.#numGrants++;
    return true;
  }

  #checkClock(nowMs: number): void {
    if (!Number.isFinite(nowMs) || nowMs < this.#lastMs) bug(`exploration clock went from ${this.#lastMs} to ${nowMs} ms`);
    this.#lastMs = nowMs;
  }
}
