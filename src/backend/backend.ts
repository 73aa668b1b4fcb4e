// The seam between the front door and whatever serves the request (vLLM's EngineClient). The API
// holds a backend, never an engine, in one of two shapes that share `BackendCore`:
//
//   Backend            engine mode (engine-backend.ts): `generate` yields token ids per choice; the
//                      API detokenizes, applies stop strings and frames them.
//   ForwardingBackend  gateway mode (proxy/proxy-backend.ts): `forward` sends the client's body,
//                      unchanged, to an upstream OpenAI server and yields its response bytes,
//                      unchanged. Upstreams return text in their own framing, so there are no token
//                      ids to hand back; pretending there were would mean re-tokenizing with a
//                      tokenizer the gateway does not have.
//
// Flow control sits in the API between validation and the backend, the same code in both modes;
// so do auth, the error catalog, metrics, request logs and the drain. `isForwarding` tells them
// apart.
//
// What gateway mode's API uses of the gateway's books (`GatewayLoad`, `LoadEntry`) and its prompt
// sizer is declared here and implemented in proxy/gateway-load.ts: the seam names no proxy or API
// type (docs/architecture.md, "Layers").
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
  /** Time-per-output-token budget (`x-slo-tpot-ms`); absent or null: none. */
  readonly tpotMs?: number | null;
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
  /**
   * Whether anything can serve a request now (gateway mode: at least one upstream healthy). While
   * false, /ready answers 503 so a load balancer sends traffic elsewhere; /health is unaffected (the
   * process is fine). Absent: the same as `ok`.
   */
  readonly serving?: boolean;
}

/** What every backend offers the API: what it serves, its clock, its health, its /stats facts. */
export interface BackendCore {
  readonly info: BackendInfo;
  readonly clock: Clock;
  health(): BackendHealth;
  /** Facts for /stats. */
  stats(): Record<string, unknown>;
}

/** Engine mode: generates token ids the API detokenizes. */
export interface Backend extends BackendCore {
  readonly tokenizer: Tokenizer;
  /** What admission control reads (null where the backend has no engine state to offer). */
  snapshot(): EngineSnapshot | null;
  /** Prompt tokens its prefix cache holds now; no side effect (no pin, no LRU touch, no statistics). */
  peekCachedTokens(promptTokens: readonly number[]): number;
  /** Start generating, or refuse at once. Aborting `signal` ends every choice. */
  generate(job: GenerationJob, signal: AbortSignal): GenerateResult;
}

/** One validated client request, ready to be sent upstream as it came. */
export interface ForwardRequest {
  readonly id: string;
  /** The model the request names: only upstreams serving it are candidates. */
  readonly model: string;
  /** The API path the client called (`/v1/chat/completions`): the upstream gets the same one. */
  readonly path: string;
  /** The client's body, byte for byte. */
  readonly body: Uint8Array;
  /** Request headers for the upstream (content type, trace context, budgets); never the client's credentials. */
  readonly headers: Readonly<Record<string, string>>;
  /** What the picker's prefix affinity matches on: the prompt as bytes (or token ids), in order. */
  readonly affinityKey: readonly number[];
  /** Try this upstream first (the one admission decided on, `Placement.upstream`); later attempts go where the picker says. */
  readonly first?: number;
  /** The client asked for a stream: its first event is due soon (a whole answer's headers come only when it is generated). */
  readonly stream?: boolean;
}

/** One forwarded request, as the books keep it (`GatewayLoad.begin` to `end`). */
export interface LoadEntry {
  readonly arrivalMs: number;
  readonly deadlineMs: number;
  readonly promptTokens: number;
  /** max_tokens × n. */
  readonly decodeTokens: number;
  /** Prompt tokens of waiting requests due no later than this one, when it arrived (for the prefill-rate sample). */
  readonly workAheadAtArrival: number;
  outputTokens: number;
  firstOutputMs: number | null;
  ended: boolean;
}

/**
 * One upstream's books of the work the gateway sent it (proxy/gateway-load.ts keeps them): the
 * snapshot admission control reads, in the shape of an engine's, and each forwarded request's life
 * in them, which the API reports as its bytes pass.
 */
export interface GatewayLoad {
  /** The books as an engine snapshot (`fresh`: rebuilt even if nothing changed). */
  snapshot(fresh?: boolean): EngineSnapshot;
  /** A request goes upstream (after admission); paired with `end`. */
  begin(r: { readonly arrivalMs: number; readonly deadlineMs: number; readonly promptTokens: number; readonly decodeTokens: number }): LoadEntry;
  /** `count` output events arrived for `e` at `nowMs`, each `gapMs` after the one before (0 for the first). */
  output(e: LoadEntry, count: number, gapMs: number, nowMs: number): void;
  /** A non-streamed answer for `e` arrived whole at `nowMs`, with `count` output tokens (its usage). */
  wholeOutput(e: LoadEntry, count: number, nowMs: number): void;
  /** `e`'s output ended on its own (EOS or a stop: true) or at its max_tokens (false): the books learn output lengths from it. */
  outputEnded(e: LoadEntry, onItsOwn: boolean): void;
  /** `e` is over, however it ended (idempotent). */
  end(e: LoadEntry): void;
}

/** Prompt tokens from prompt bytes, before an upstream is chosen (gateway mode has no tokenizer). */
export interface PromptSizer {
  estimateTokens(bytes: number): number;
  /** An upstream reported a prompt's token count. */
  learn(bytes: number, tokens: number): void;
}

/** Where a request would go now, and the books of that upstream, which admission control reads. */
export interface Placement {
  /** The upstream's index (`ForwardRequest.first`). */
  readonly upstream: number;
  readonly books: GatewayLoad;
}

/** An upstream's answer whose first body bytes have arrived (nothing has been sent to the client yet). */
export interface ForwardResponse {
  readonly status: number;
  /** The upstream's content type (`text/event-stream` for a stream). */
  readonly contentType: string;
  /** Which upstream answered (its base URL), for logs and /stats. */
  readonly upstream: string;
  /**
   * The body, unchanged. An event stream is cut only at event boundaries, so what has been yielded
   * is always whole events. Throws if the upstream fails part way; ends early once the signal aborts.
   */
  readonly body: AsyncIterable<Uint8Array>;
}

export type ForwardResult = { readonly ok: true; readonly response: ForwardResponse } | { readonly ok: false; readonly refusal: Refusal };

/** Gateway mode: forwards whole requests to upstream servers. */
export interface ForwardingBackend extends BackendCore {
  /** Every model name the upstreams serve (a request's `model` must be one). */
  models(): readonly string[];
  /** Prompt tokens from prompt bytes, at the ratio the upstreams' usage taught (absent: 4 bytes a token). */
  readonly sizer?: PromptSizer;
  /**
   * The upstreams that could take this request now, with their books: first the one the picker
   * would send it to, then the others in the picker's order (empty: none can take it); absent: no
   * admission decision in this backend.
   */
  placements?(model: string, affinityKey: readonly number[]): readonly Placement[];
  /**
   * Pick an upstream and send the request, failing over to another while no response byte has
   * arrived; or refuse (no upstream healthy, draining). Aborting `signal` cancels the upstream request.
   */
  forward(req: ForwardRequest, signal: AbortSignal): Promise<ForwardResult>;
}

export type AnyBackend = Backend | ForwardingBackend;

export function isForwarding(b: AnyBackend): b is ForwardingBackend {
  return 'forward' in b;
}
