// A request's life inside the engine: its tokens, its progress, its output stream and its end.
//
// Status is ordered: WAITING < RUNNING < FINISHED_*; a status never moves backwards except
// RUNNING → WAITING on preemption (the request keeps its generated tokens and recomputes them).
// Only the scheduler changes `status`, `seqId` and `numComputedTokens`; the API reads events.
//
// One rule for prefill and decode: `numTokens` is everything the sequence should hold (prompt +
// generated), `numComputedTokens` what its KV already holds. A step feeds tokens until they meet.

import type { IncrementalDetokenizer, SamplingParams, SeqId } from './runner/runner.ts';
import { StopMatcher } from './stop-matcher.ts';

export enum RequestStatus {
  WAITING = 0,
  RUNNING = 1,
  FINISHED_STOPPED = 2,
  FINISHED_LENGTH = 3,
  FINISHED_ABORTED = 4,
  FINISHED_ERROR = 5,
}

export type FinishReason = 'stop' | 'length' | 'abort' | 'error';

export const isFinished = (s: RequestStatus): boolean => s >= RequestStatus.FINISHED_STOPPED;

/** What the API hears from a request. Exactly one `finish` event ends every request. */
export type RequestEvent =
  | { readonly type: 'delta'; readonly text: string }
  | { readonly type: 'finish'; readonly reason: FinishReason; readonly promptTokens: number; readonly completionTokens: number; readonly message?: string };

export interface RequestInit {
  readonly id: string;
  readonly promptTokens: readonly number[];
  readonly maxTokens: number;
  readonly sampling: SamplingParams;
  readonly stop: readonly string[];
  readonly ignoreEos: boolean;
  readonly arrivalMs: number;
  readonly sloMs: number;
  readonly detokenizer: IncrementalDetokenizer;
  readonly isEog: (token: number) => boolean;
  readonly onEvent: (ev: RequestEvent) => void;
}

export class Request {
  readonly id: string;
  readonly promptTokens: readonly number[];
  readonly maxTokens: number;
  readonly sampling: SamplingParams;
  readonly ignoreEos: boolean;
  readonly arrivalMs: number;
  /** Earliest-deadline-first key: arrival + SLO. */
  readonly deadlineMs: number;
  readonly outputTokens: number[] = [];

  status = RequestStatus.WAITING;
  /** Tokens (prompt + output) whose KV this request's sequence holds. */
  numComputedTokens = 0;
  /** Tokens of the prompt found in the prefix cache at admission (for hit-rate accounting). */
  numCachedTokens = 0;
  seqId: SeqId | null = null;
  /** Set once the sampler for the current sequence has been started (reset on preemption). */
  samplerStarted = false;
  numPreemptions = 0;
  /** When the request first entered the running set (queue time = admittedMs − arrivalMs). */
  admittedMs: number | null = null;
  firstTokenMs: number | null = null;
  finishedMs: number | null = null;

  readonly #detok: IncrementalDetokenizer;
  readonly #stop: StopMatcher;
  readonly #isEog: (token: number) => boolean;
  readonly #onEvent: (ev: RequestEvent) => void;
  #abortRequested = false;
  /** A stop string ended generation: what the matcher holds is part of it and is never sent. */
  #stopMatched = false;

  constructor(init: RequestInit) {
    if (init.promptTokens.length === 0) throw new Error('Request: expected a non-empty prompt');
    if (!(init.maxTokens >= 1)) throw new Error(`Request: expected maxTokens ≥ 1, got ${init.maxTokens}`);
    this.id = init.id;
    this.promptTokens = init.promptTokens;
    this.maxTokens = init.maxTokens;
    this.sampling = init.sampling;
    this.ignoreEos = init.ignoreEos;
    this.arrivalMs = init.arrivalMs;
    this.deadlineMs = init.arrivalMs + init.sloMs;
    this.#detok = init.detokenizer;
    this.#stop = new StopMatcher(init.stop);
    this.#isEog = init.isEog;
    this.#onEvent = init.onEvent;
  }

  get numTokens(): number {
    return this.promptTokens.length + this.outputTokens.length;
  }

  get numPromptTokens(): number {
    return this.promptTokens.length;
  }

  /** Token at position i of the whole sequence (prompt then output). */
  tokenAt(i: number): number {
    const p = this.promptTokens.length;
    return i < p ? this.promptTokens[i]! : this.outputTokens[i - p]!;
  }

  /** The tokens in [from, to) of the whole sequence. */
  tokensIn(from: number, to: number): number[] {
    const out: number[] = [];
    for (let i = from; i < to; i++) out.push(this.tokenAt(i));
    return out;
  }

  get abortRequested(): boolean {
    return this.#abortRequested;
  }

  /** The client went away: the scheduler drops the request before its next step. */
  requestAbort(): void {
    this.#abortRequested = true;
  }

  /**
   * Record a sampled token and stream its text. Returns why the request must end now, or null.
   * Called by the scheduler only.
   */
  appendToken(token: number, nowMs: number): FinishReason | null {
    this.firstTokenMs ??= nowMs;
    if (this.#isEog(token) && !this.ignoreEos) {
      this.outputTokens.push(token);
      return 'stop';
    }
    this.outputTokens.push(token);
    const pushed = this.#stop.push(this.#detok.push(token));
    if (pushed.text.length > 0) this.#onEvent({ type: 'delta', text: pushed.text });
    if (pushed.stopped) {
      this.#stopMatched = true;
      return 'stop';
    }
    if (this.outputTokens.length >= this.maxTokens) return 'length';
    return null;
  }

  /** End the request: flush held text (unless a stop string ended it) and emit the one finish event. */
  finish(reason: FinishReason, nowMs: number, message?: string): void {
    if (isFinished(this.status)) throw new Error(`bug: request ${this.id} finished twice`);
    this.status = {
      stop: RequestStatus.FINISHED_STOPPED,
      length: RequestStatus.FINISHED_LENGTH,
      abort: RequestStatus.FINISHED_ABORTED,
      error: RequestStatus.FINISHED_ERROR,
    }[reason];
    this.finishedMs = nowMs;
    if ((reason === 'length' || reason === 'stop') && !this.#stopMatched) {
      const tail = this.#stop.flush() + this.#detok.flush();
      if (tail.length > 0) this.#onEvent({ type: 'delta', text: tail });
    }
    const ev: RequestEvent = {
      type: 'finish',
      reason,
      promptTokens: this.promptTokens.length,
      completionTokens: this.outputTokens.length,
      ...(message === undefined ? {} : { message }),
    };
    this.#onEvent(ev);
  }
}
