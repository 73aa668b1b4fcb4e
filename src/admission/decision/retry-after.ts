// Retry-After for a refused request: an estimate of when capacity will exist, in whole seconds —
// the work ahead at the measured token rates — not a constant wearing a header's clothes.
//
//   seconds = ⌈prompt tokens ahead / prefill rate + decode tokens ahead / decode rate⌉, clamped to [minS, maxS]
//
// Floored at 1 s (a client told 0 retries at once, into the same overload) and capped at 60 s by
// default (beyond that the estimate is mostly extrapolation, and a client should re-ask rather than
// sleep on it). A rate not yet measured (a cold engine) with work queued gives the cap; no work gives
// the floor. Monotone non-decreasing in each kind of queued work at fixed rates (property-tested).
// Complexity O(1).

import type { EngineSnapshot } from '../../engine/snapshot.ts';
import { bug } from '../../util/bug.ts';

/** The snapshot fields the estimate reads. */
export type RetryWork = Pick<EngineSnapshot, 'waitingPromptTokens' | 'runningPromptTokens' | 'remainingDecodeTokens' | 'prefillTokensPerS' | 'decodeTokensPerS'>;

export interface RetryAfterOptions {
  /** Floor, whole seconds ≥ 1; 1 by default. */
  readonly minS?: number;
  /** Cap, whole seconds ≥ minS; 60 by default. */
  readonly maxS?: number;
}

export class RetryAfter {
  readonly minS: number;
  readonly maxS: number;

  constructor(options: RetryAfterOptions = {}) {
    const { minS = 1, maxS = 60 } = options;
    if (!Number.isSafeInteger(minS) || minS < 1) throw new RangeError(`RetryAfter: expected minS to be an integer ≥ 1, got ${String(minS)}`);
    if (!Number.isSafeInteger(maxS) || maxS < minS) throw new RangeError(`RetryAfter: expected maxS to be an integer ≥ minS (${minS}), got ${String(maxS)}`);
    this.minS = minS;
    this.maxS = maxS;
  }

  /** Whole seconds for an estimate of the work ahead in seconds (+∞ allowed: unknown rate). */
  fromWorkS(workS: number): number {
    if (Number.isNaN(workS) || workS < 0) bug(`retry-after given ${workS} s of work`);
    return Math.min(this.maxS, Math.max(this.minS, Math.ceil(workS)));
  }

  /** Whole seconds from the engine's queued work and measured rates. */
  fromWork(w: RetryWork): number {
    const prompt = w.waitingPromptTokens + w.runningPromptTokens;
    return this.fromWorkS(timeS(prompt, w.prefillTokensPerS) + timeS(w.remainingDecodeTokens, w.decodeTokensPerS));
  }
}

/** Seconds to get through `tokens` at `perS`; +∞ when there is work and no measured rate. */
function timeS(tokens: number, perS: number | null): number {
  if (Number.isNaN(tokens) || tokens < 0) bug(`retry-after given ${tokens} queued tokens`);
  if (tokens === 0) return 0;
  return perS !== null && perS > 0 ? tokens / perS : Infinity;
}
