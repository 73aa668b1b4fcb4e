// What a step gives back to the world, as data: per request, the tokens it gained and whether it
// ended (vLLM's EngineCoreOutputs). The scheduler produces these; the engine hands each to the
// request's sink; detokenizing, stop strings and framing happen after the step, in the API.
//
// The timeline is the plain per-request record that observability and tracing read (never the
// live Request); gateway mode fills the same record from an upstream's stream.

import type { TokenLogprob } from './plan.ts';

export type FinishReason = 'stop' | 'length' | 'abort' | 'error';

/** A request's life in engine time (ms, the engine's clock). Null: has not happened (yet). */
export interface RequestTimeline {
  readonly requestId: string;
  readonly arrivalMs: number;
  /** Arrival + the request's latency budget. */
  readonly deadlineMs: number;
  /** When it first got a step (queue time = scheduledMs − arrivalMs). */
  readonly scheduledMs: number | null;
  readonly firstTokenMs: number | null;
  readonly finishedMs: number | null;
  readonly numPromptTokens: number;
  readonly maxTokens: number;
  /** Prompt tokens found in the prefix cache when it first got a step. */
  readonly numCachedTokens: number;
  readonly numOutputTokens: number;
  readonly numPreemptions: number;
  readonly outcome: FinishReason | null;
}

export interface RequestOutput {
  readonly requestId: string;
  /** Tokens sampled this step, in order (an ending EOG token included). */
  readonly newTokenIds: readonly number[];
  /** With log-probabilities asked for: one entry per new token (null where the runner gave none). */
  readonly newLogprobs?: readonly (TokenLogprob | null)[];
  /** Set on the request's last output, exactly once. */
  readonly finishReason: FinishReason | null;
  /** Why it failed, for `error`. */
  readonly message: string | null;
  readonly timeline: RequestTimeline;
}

/** Something that can report what changed since it was last asked (a Request). */
export interface OutputSource {
  takeOutput(): RequestOutput | null;
}

/**
 * Collects the requests a scheduler touched while planning or applying a step, once each, in
 * first-touch order; `take()` turns them into outputs. O(1) per touch.
 */
export class OutputCollector {
  #touched = new Set<OutputSource>();

  touch(source: OutputSource): void {
    this.#touched.add(source);
  }

  take(): RequestOutput[] {
    if (this.#touched.size === 0) return [];
    const out: RequestOutput[] = [];
    for (const s of this.#touched) {
      const o = s.takeOutput();
      if (o !== null) out.push(o);
    }
    this.#touched = new Set();
    return out;
  }
}
