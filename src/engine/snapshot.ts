// The engine's state as the admission controller reads it: a frozen record of scalars, rebuilt
// lazily after every step and every arrival, never a live object. "Work ahead of a deadline" is
// answered from one sorted array (binary search); the running averages are exponentially
// weighted over steps.
//
// Cost: building is O(held requests · log) (a sort of the waiting set by deadline); it happens at
// most once per step or arrival, and only when someone reads it.

import type { SchedulerSnapshot } from './scheduler/scheduler.ts';

export interface EngineSnapshot {
  /** Steps run so far and the engine time the snapshot describes, ms. */
  readonly numSteps: number;
  readonly atMs: number;
  readonly numWaiting: number;
  readonly numRunning: number;
  readonly numFreeSeqIds: number;
  readonly maxSequences: number;
  readonly numBlocks: number;
  readonly numFreeBlocks: number;
  readonly blockSize: number;
  /** Tokens waiting requests must compute before their first (next) sample. */
  readonly waitingPromptTokens: number;
  /** Prompt tokens running requests have still to compute. */
  readonly runningPromptTokens: number;
  /** Output tokens running requests may still generate (max_tokens less what they have): an upper bound. */
  readonly remainingDecodeTokens: number;
  /** Deadlines of held requests that still have prompt work, ascending, with the running sum of that work. */
  readonly promptWorkByDeadline: readonly { readonly deadlineMs: number; readonly cumulativeTokens: number }[];
  /** Exponentially weighted step time, ms, and token rates, tokens/s (null before the first such step). */
  readonly avgStepMs: number | null;
  /**
   * Step time averaged over about a long request's decode (α = 1/256 per step), ms: what a request
   * admitted now will see per token if load stays as it has been, where avgStepMs (about 5 steps)
   * says only what the last few steps took — on an engine shedding a 4× overload, a request that
   * arrived in a lull measured 1.5–2 ms there and then decoded at 2–4× that.
   */
  readonly longStepMs: number | null;
  readonly prefillTokensPerS: number | null;
  readonly decodeTokensPerS: number | null;
  /** The scheduler's own view (KV, preemptions, why it stopped taking waiting requests). */
  readonly scheduler: SchedulerSnapshot;
}

/** Prompt tokens held requests with a deadline at or before `deadlineMs` have still to compute (EDF serves them first). */
export function promptTokensAhead(s: EngineSnapshot, deadlineMs: number): number {
  const a = s.promptWorkByDeadline;
  let lo = 0;
  let hi = a.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (a[mid]!.deadlineMs <= deadlineMs) lo = mid + 1;
    else hi = mid;
  }
  return lo === 0 ? 0 : a[lo - 1]!.cumulativeTokens;
}

/** An exponentially weighted mean; null until the first sample. */
export class Ewma {
  readonly #alpha: number;
  #value: number | null = null;

  constructor(alpha: number) {
    if (!(alpha > 0 && alpha <= 1)) throw new Error(`Ewma: expected alpha in (0, 1], got ${alpha}`);
    this.#alpha = alpha;
  }

  get value(): number | null {
    return this.#value;
  }

  add(x: number): void {
    this.#value = this.#value === null ? x : this.#value + this.#alpha * (x - this.#value);
  }
}
