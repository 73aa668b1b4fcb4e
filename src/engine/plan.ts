// The records that cross the engine's seams, as plain data: what the scheduler asks the runner to
// do in one step (a RunnerPlan of KV operations and batch rows, keyed by request id) and what the
// runner reports back (a StepResult). They can be logged, asserted on, written by the flight
// recorder and replayed; nothing in them refers to a live object.

/** A llama.cpp sequence id (0 ≤ id < maxSequences). */
export type SeqId = number & { readonly __brand: 'SeqId' };
export const asSeqId = (n: number): SeqId => n as SeqId;

/** Per-request sampling settings; the runner keeps one sampler per sequence. */
export interface SamplingParams {
  /** 0 means greedy. */
  readonly temperature: number;
  /** Nucleus mass in (0, 1]; 1 disables top-p. */
  readonly topP: number;
  /** Seed of this sequence's sampler RNG: the same seed, prompt and settings give the same tokens. */
  readonly seed: number;
}

/** KV operations run before the forward pass, in order. Positions are half-open [p0, p1); p1 < 0 means "to the end". */
export type KvOp =
  /** Share the cells of `src` in [p0, p1) with `dst` (a prefix-cache hit, or a fork for parallel sampling). */
  | { readonly kind: 'copy'; readonly srcSeqId: SeqId; readonly dstSeqId: SeqId; readonly p0: number; readonly p1: number }
  /** Drop `seqId`'s cells in [p0, p1) (a finished, aborted or preempted sequence, or an evicted cache node). */
  | { readonly kind: 'remove'; readonly seqId: SeqId; readonly p0: number; readonly p1: number };

/** One sequence's share of a forward pass. */
export interface StepItem {
  /** The engine's id of the request this row serves (for logs and the mock's determinism). */
  readonly requestId: string;
  /** The llama.cpp sequence the tokens are appended to. */
  readonly seqId: SeqId;
  /** Tokens fed this step: a prompt chunk during prefill, the last sampled token during decode. */
  readonly tokens: readonly number[];
  /** Position of tokens[0] in the sequence. */
  readonly startPos: number;
  /** Sample one token after the last fed token (true when this step finishes the prompt, and on every decode step). */
  readonly sample: boolean;
  /** Start a fresh sampler for this sequence with `sampling` (the request's first step on this sequence). */
  readonly resetSampler: boolean;
  readonly sampling: SamplingParams;
}

/** What the scheduler asks the runner to do in one step. */
export interface RunnerPlan {
  readonly kvOps: readonly KvOp[];
  readonly items: readonly StepItem[];
}

/** What one step produced. */
export type StepResult =
  | {
      readonly ok: true;
      /** One entry per plan item, in plan order: the sampled token, or null where `sample` was false. */
      readonly sampled: readonly (number | null)[];
      /** Wall time of the forward pass itself in ms (the llama runner measures it around llama_decode). */
      readonly computeMs: number;
    }
  | { readonly ok: false; readonly reason: 'no_kv_slot' | 'backend_error'; readonly message: string };
