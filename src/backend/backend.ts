// The seam between the front door and whatever generates tokens (vLLM's EngineClient). The API
// holds a Backend, never an engine: engine mode implements it over the in-process Engine
// (engine-backend.ts), gateway mode will implement it over upstream servers. Flow control and
// admission sit in the API between validation and `generate`, the same code in both modes.
//
// A generation is a stream of events per choice (`index`), ending with exactly one `finish` per
// choice; the API detokenizes, applies stop strings and frames them. Aborting the signal ends
// every choice; `stopChoice` ends one (a stop string matched in the front end).

import type { Clock } from '../engine/clock.ts';
import type { FinishReason, RequestTimeline } from '../engine/outputs.ts';
import type { SamplingParams, TokenLogprob } from '../engine/plan.ts';
import type { EngineSnapshot } from '../engine/snapshot.ts';
import type { Tokenizer } from '../engine/tokenizer.ts';
import type { Refusal } from './refusal.ts';

export interface BackendInfo {
  /** Which implementation serves: /stats says so. */
  readonly mode: 'engine' | 'gateway';
  /** The model name served under /v1/models. */
  readonly modelId: string;
  /** Longest prompt + completion, tokens. */
  readonly contextTokens: number;
}

/** One validated, tokenized request, ready to run. */
export interface GenerationJob {
  readonly id: string;
  readonly promptTokens: readonly number[];
  /** Per choice. */
  readonly maxTokens: number;
  readonly sampling: SamplingParams;
  readonly ignoreEos: boolean;
  /** Choices to generate from the one prompt (parallel sampling). */
  readonly n: number;
  /** Backend clock, ms. */
  readonly arrivalMs: number;
  readonly sloMs: number;
}

export type GenerationEvent =
  /** `logprobs`: one entry per token, when the job's sampling asked for log-probabilities. */
  | { readonly type: 'tokens'; readonly index: number; readonly tokenIds: readonly number[]; readonly logprobs?: readonly (TokenLogprob | null)[] }
  | { readonly type: 'finish'; readonly index: number; readonly reason: FinishReason; readonly message: string | null; readonly timeline: RequestTimeline };

export interface Generation extends AsyncIterable<GenerationEvent> {
  /** The front end ended choice `index` (a stop string): the backend stops generating it. */
  stopChoice(index: number): void;
}

export type GenerateResult = { readonly ok: true; readonly generation: Generation } | { readonly ok: false; readonly refusal: Refusal };

export interface BackendHealth {
  /** False once the backend can no longer serve (the engine's loop failed). */
  readonly ok: boolean;
  readonly draining: boolean;
  readonly failure: string | null;
}

export interface Backend {
  readonly info: BackendInfo;
  readonly tokenizer: Tokenizer;
  readonly clock: Clock;
  health(): BackendHealth;
  /** Facts for /stats. */
  stats(): Record<string, unknown>;
  /** What admission control reads (null where the backend has no engine state to offer). */
  snapshot(): EngineSnapshot | null;
  /** Prompt tokens its prefix cache holds now; no side effect (no pin, no LRU touch, no statistics). */
  peekCachedTokens(promptTokens: readonly number[]): number;
  /** Start generating, or refuse at once. Aborting `signal` ends every choice. */
  generate(job: GenerationJob, signal: AbortSignal): GenerateResult;
}
