// A request's life inside the engine: its tokens, its progress and its end — token ids only.
//
// Status is ordered: WAITING < RUNNING < FINISHED_*; a status never moves backwards except
// RUNNING → WAITING on preemption (the request keeps its generated tokens and recomputes them).
// Only the scheduler changes `status`, `seqId` and `numComputedTokens` and calls `appendToken` /
// `finish`; what changed is collected with `takeOutput()` after the step (outputs.ts). Text,
// stop strings and framing belong to the API, after the step.
//
// One rule for prefill and decode: `numTokens` is everything the sequence should hold (prompt +
// generated), `numComputedTokens` what its KV already holds. A step feeds tokens until they meet.

import type { SamplingParams, SeqId, TokenLogprob } from './plan.ts';
import { samplerNeedsHistory } from './plan.ts';
import type { FinishReason, OutputSource, RequestOutput, RequestTimeline } from './outputs.ts';
import { bug } from '../util/bug.ts';

export type { FinishReason } from './outputs.ts';

export enum RequestStatus {
  WAITING = 0,
  RUNNING = 1,
  FINISHED_STOPPED = 2,
  FINISHED_LENGTH = 3,
  FINISHED_ABORTED = 4,
  FINISHED_ERROR = 5,
}

export const isFinished = (s: RequestStatus): boolean => s >= RequestStatus.FINISHED_STOPPED;

/** Why the front end ended a request early: the client left (`abort`) or a stop string matched (`stop`). */
export type EndRequest = 'abort' | 'stop';

export interface RequestInit {
  readonly id: string;
  readonly promptTokens: readonly number[];
  readonly maxTokens: number;
  readonly sampling: SamplingParams;
  readonly ignoreEos: boolean;
  readonly arrivalMs: number;
  readonly sloMs: number;
  /**
   * Time-per-output-token budget (ms): while this request decodes, a step that carries it also
   * carries no more prompt rows than fit the budget (the step budget; docs/per-token.md §13).
   */
  readonly tpotMs?: number;
  /** End-of-generation test (the tokenizer's). */
  readonly isEog: (token: number) => boolean;
  /**
   * Parallel sampling: another choice of the same prompt. The scheduler computes the prompt once,
   * in `forkOf`, and forks its sequence for this one (copy-on-write); if it cannot, this request
   * computes its prompt itself. Must have the same prompt tokens.
   */
  readonly forkOf?: Request;
}

const STATUS_OF: Readonly<Record<FinishReason, RequestStatus>> = {
  stop: RequestStatus.FINISHED_STOPPED,
  length: RequestStatus.FINISHED_LENGTH,
  abort: RequestStatus.FINISHED_ABORTED,
  error: RequestStatus.FINISHED_ERROR,
};

export class Request implements OutputSource {
  readonly id: string;
  readonly promptTokens: readonly number[];
  readonly maxTokens: number;
  readonly sampling: SamplingParams;
  readonly ignoreEos: boolean;
  readonly arrivalMs: number;
  /** Earliest-deadline-first key: arrival + SLO. */
  readonly deadlineMs: number;
  /** Time-per-output-token budget (ms), or null. */
  readonly tpotMs: number | null;
  readonly outputTokens: number[] = [];
  /** With sampling.logprobs set: one entry per output token (null where the runner gave none). */
  readonly outputLogprobs: (TokenLogprob | null)[] = [];
  /** The choice whose prompt computation this one shares (null: computes its own). */
  readonly forkOf: Request | null;

  status = RequestStatus.WAITING;
  /** Tokens (prompt + output) whose KV this request's sequence holds. */
  numComputedTokens = 0;
  /** Tokens of the prompt found in the prefix cache when it first got a step (for hit-rate accounting). */
  numCachedTokens = 0;
  seqId: SeqId | null = null;
  /** Set once the sampler for the current sequence has been started (reset on preemption). */
  samplerStarted = false;
  numPreemptions = 0;
  /** When the request first entered the running set (queue time = scheduledMs − arrivalMs). */
  scheduledMs: number | null = null;
  firstTokenMs: number | null = null;
  finishedMs: number | null = null;

  readonly #isEog: (token: number) => boolean;
  #endRequested: EndRequest | null = null;
  #finishReason: FinishReason | null = null;
  #message: string | null = null;
  /** Output tokens already reported by takeOutput(). */
  #numReported = 0;
  #finishReported = false;

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
    if (init.tpotMs !== undefined && !(init.tpotMs > 0)) throw new Error(`Request: expected tpotMs > 0, got ${init.tpotMs}`);
    this.tpotMs = init.tpotMs ?? null;
    this.#isEog = init.isEog;
    this.forkOf = init.forkOf ?? null;
    if (this.forkOf !== null && this.forkOf.promptTokens !== init.promptTokens && this.forkOf.promptTokens.join() !== init.promptTokens.join()) {
      throw new Error(`Request: expected a fork of ${this.forkOf.id} to have the same prompt`);
    }
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

  /** The front end asked to end it (client gone, or a stop string matched); the scheduler ends it before the next batch. */
  get abortRequested(): boolean {
    return this.#endRequested !== null;
  }

  /** How the front end asked to end it: the finish reason the scheduler gives it. */
  get endReason(): EndRequest {
    return this.#endRequested ?? 'abort';
  }

  /** The first request wins: a stop that races a disconnect stays a stop. */
  requestAbort(reason: EndRequest = 'abort'): void {
    this.#endRequested ??= reason;
  }

  /** Record a sampled token. Returns why the request must end now (EOG, length), or null. Scheduler only. */
  appendToken(token: number, nowMs: number, logprob: TokenLogprob | null = null): FinishReason | null {
    this.firstTokenMs ??= nowMs;
    this.outputTokens.push(token);
    if (this.sampling.logprobs !== undefined) this.outputLogprobs.push(logprob);
    if (this.#isEog(token) && !this.ignoreEos) return 'stop';
    if (this.outputTokens.length >= this.maxTokens) return 'length';
    return null;
  }

  /** End the request. Scheduler only; the next takeOutput() reports it. */
  finish(reason: FinishReason, nowMs: number, message?: string): void {
    if (isFinished(this.status)) bug(`request ${this.id} finished twice`);
    this.status = STATUS_OF[reason];
    this.finishedMs = nowMs;
    this.#finishReason = reason;
    this.#message = message ?? null;
  }

  get timeline(): RequestTimeline {
    return {
      requestId: this.id,
      arrivalMs: this.arrivalMs,
      deadlineMs: this.deadlineMs,
      scheduledMs: this.scheduledMs,
      firstTokenMs: this.firstTokenMs,
      finishedMs: this.finishedMs,
      numPromptTokens: this.promptTokens.length,
      maxTokens: this.maxTokens,
      numCachedTokens: this.numCachedTokens,
      numOutputTokens: this.outputTokens.length,
      numPreemptions: this.numPreemptions,
      outcome: this.#finishReason,
    };
  }

  /** Tokens gained and the end, since the last call; null when nothing changed. */
  takeOutput(): RequestOutput | null {
    const ended = this.#finishReason !== null && !this.#finishReported;
    if (this.#numReported === this.outputTokens.length && !ended) return null;
    const newTokenIds = this.outputTokens.slice(this.#numReported);
    const logprobs = this.sampling.logprobs === undefined ? {} : { newLogprobs: this.outputLogprobs.slice(this.#numReported) };
    this.#numReported = this.outputTokens.length;
    if (ended) this.#finishReported = true;
    return { requestId: this.id, newTokenIds, ...logprobs, finishReason: ended ? this.#finishReason : null, message: ended ? this.#message : null, timeline: this.timeline };
  }
}

/** A fresh sampler's history for a request's next step, when it starts one that needs it (plan.ts StepItem). */
export function samplerHistory(r: Request): { samplerHistory?: { tokens: number[]; numPromptTokens: number } } {
  if (r.samplerStarted || !samplerNeedsHistory(r.sampling)) return {};
  return { samplerHistory: { tokens: r.tokensIn(0, r.numTokens), numPromptTokens: r.numPromptTokens } };
}
