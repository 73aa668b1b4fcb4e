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
  /**
   * The 90th percentile, over recently finished requests (by EOS, a stop or their cap; not aborted),
   * of output tokens ÷ max_tokens; null until enough have finished (OutputFractions). 1 when every
   * request runs to its cap (ignore_eos); well under 1 when outputs end at EOS and max_tokens is only
   * a cap — so `max_tokens × this` is a length the throughput arithmetic can plan with, learned
   * from requests that are over, never from the one being decided.
   */
  readonly outputFractionP90: number | null;
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

/**
 * The recent share of max_tokens that finished requests used: a ring of the last `capacity`
 * fractions and their `q`-quantile (null with fewer than `minSamples`). add is O(1); value sorts a
 * copy of the ring only after a change (at most once per finished request read).
 */
export class OutputFractions {
  readonly #ring: Float64Array;
  readonly #q: number;
  readonly #minSamples: number;
  #next = 0;
  #size = 0;
  #cached: number | null = null;
  #stale = false;

  constructor(o: { readonly capacity?: number; readonly q?: number; readonly minSamples?: number } = {}) {
    const { capacity = 256, q = 0.9, minSamples = 20 } = o;
    if (!(capacity >= minSamples && minSamples >= 1)) throw new Error(`OutputFractions: expected capacity ≥ minSamples ≥ 1, got ${capacity}, ${minSamples}`);
    if (!(q > 0 && q <= 1)) throw new Error(`OutputFractions: expected q in (0, 1], got ${q}`);
    this.#ring = new Float64Array(capacity);
    this.#q = q;
    this.#minSamples = minSamples;
  }

  /** One finished request: `outputTokens` of its `maxTokens` (a cap of 0 or less says nothing). */
  add(outputTokens: number, maxTokens: number): void {
    if (!(maxTokens > 0)) return;
    this.#ring[this.#next] = Math.min(1, Math.max(0, outputTokens / maxTokens));
    this.#next = (this.#next + 1) % this.#ring.length;
    this.#size = Math.min(this.#size + 1, this.#ring.length);
    this.#stale = true;
  }

  get value(): number | null {
    if (this.#size < this.#minSamples) return null;
    if (this.#stale) {
      const sorted = this.#ring.slice(0, this.#size).sort();
      this.#cached = sorted[Math.min(this.#size - 1, Math.ceil(this.#q * this.#size) - 1)]!;
      this.#stale = false;
    }
    return this.#cached;
  }
}
