// One record per engine step: what arrived and was ended since the previous step, the plan the
// runner executed, its result, what each request gained, and the step's times. It is the unit the
// flight recorder writes, what a crash dumps, and the input of replay. Plain data only.
//
// StepLog keeps the last N records in a ring: O(1) push, nothing allocated once full.

import type { RequestOutput } from './outputs.ts';
import type { RunnerPlan, StepResult } from './plan.ts';
import type { EndRequest } from './request.ts';

export type StepKind = 'prefill' | 'decode' | 'mixed';

export interface StepRecord {
  /** 0, 1, 2, ... over the engine's life (steps that ran the runner only). */
  readonly index: number;
  /** Engine clock, ms. */
  readonly startMs: number;
  readonly endMs: number;
  /** The forward pass alone, ms (null when the step failed). */
  readonly computeMs: number | null;
  /** Request ids this step's plan was the first to see (submitted after the previous record's schedule(), before this one's). */
  readonly arrivals: readonly string[];
  /** Requests the front end ended since the previous record's schedule() and before this one's, and how. */
  readonly aborts: readonly { readonly requestId: string; readonly reason: EndRequest }[];
  readonly plan: RunnerPlan;
  readonly result: StepResult;
  /** What each request gained this step (the outputs of planning included). */
  readonly outputs: readonly RequestOutput[];
  readonly kind: StepKind;
  readonly numPromptTokens: number;
  readonly numDecodeTokens: number;
}

export class StepLog {
  readonly #capacity: number;
  readonly #ring: StepRecord[] = [];
  #next = 0;

  constructor(capacity: number) {
    if (!(Number.isInteger(capacity) && capacity >= 1)) throw new Error(`StepLog: expected a positive integer capacity, got ${capacity}`);
    this.#capacity = capacity;
  }

  push(r: StepRecord): void {
    if (this.#ring.length < this.#capacity) this.#ring.push(r);
    else this.#ring[this.#next] = r;
    this.#next = (this.#next + 1) % this.#capacity;
  }

  /** Oldest first. */
  records(): StepRecord[] {
    if (this.#ring.length < this.#capacity) return [...this.#ring];
    return [...this.#ring.slice(this.#next), ...this.#ring.slice(0, this.#next)];
  }
}
