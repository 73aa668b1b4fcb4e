// The records that cross the engine's seams, as plain data: what the scheduler asks the runner to
// do in one step (a RunnerPlan of KV operations and batch rows, keyed by request id) and what the
// runner reports back (a StepResult). They can be logged, asserted on, written by the flight
// recorder and replayed; nothing in them refers to a live object.

/** A llama.cpp sequence id (0 ≤ id < maxSequences). */
export type SeqId = number & { readonly __brand: 'SeqId' };
export const asSeqId = (n: number): SeqId => n as SeqId;

/**
 * Per-request sampling settings; the runner keeps one sampler per sequence. The fields after
 * `seed` are optional: absent means off (the defaults below), so a plain {temperature, topP, seed}
 * is a complete setting. docs/sampling.md describes each and the order the llama runner applies them.
 */
export interface SamplingParams {
  /** 0 means greedy. */
  readonly temperature: number;
  /** Nucleus mass in (0, 1]; 1 disables top-p. */
  readonly topP: number;
  /** Seed of this sequence's sampler RNG: the same seed, prompt and settings give the same tokens. */
  readonly seed: number;
  /** Keep the k most likely tokens; 0 (default) disables. */
  readonly topK?: number;
  /** Drop tokens less likely than minP × the most likely one's probability; 0 (default) disables. */
  readonly minP?: number;
  /** vLLM's multiplicative penalty over prompt and output tokens; 1 (default) disables. */
  readonly repetitionPenalty?: number;
  /** OpenAI's additive penalties over the output so far (per occurrence / once); 0 (default) disables. */
  readonly frequencyPenalty?: number;
  readonly presencePenalty?: number;
  /** Added to a token's logit before anything else (token ids inside the vocabulary). */
  readonly logitBias?: readonly LogitBias[];
  /** A GBNF grammar (root rule `root`) every sampled token must follow; absent: none. */
  readonly grammar?: string;
  /** The grammar applies only from a trigger on: a token in `tokens`, or output text matching one of `patterns` (regexes). */
  readonly grammarLazy?: { readonly patterns: readonly string[]; readonly tokens: readonly number[] };
  /** Tokens the grammar accepts before the first output token (the chat format's generation prompt). */
  readonly grammarPrefill?: readonly number[];
  /** Report each sampled token's log-probability and this many alternatives (0..20); absent: none. */
  readonly logprobs?: number;
}

export interface LogitBias {
  readonly tokenId: number;
  /** In [-100, 100]; -100 in effect bans the token, +100 in effect forces it. */
  readonly bias: number;
}

/** A fresh sampler for these settings needs the tokens before it (penalties count them, a grammar resumes after them). */
export function samplerNeedsHistory(s: SamplingParams): boolean {
  return (s.repetitionPenalty ?? 1) !== 1 || (s.frequencyPenalty ?? 0) !== 0 || (s.presencePenalty ?? 0) !== 0 || s.grammar !== undefined;
}

/** A sampled token's log-probability and its most likely alternatives (from the raw logits). */
export interface TokenLogprob {
  readonly logprob: number;
  /** Most likely first; as many as the request's `logprobs` asked for. */
  readonly top: readonly { readonly tokenId: number; readonly logprob: number }[];
}

/** KV operations run before the forward pass, in order. Positions are half-open [p0, p1); p1 < 0 means "to the end". */
export type KvOp =
  /** Share the cells of `src` in [p0, p1) with `dst` (a prefix-cache hit, or a fork for parallel sampling). */
  | { readonly kind: 'copy'; readonly srcSeqId: SeqId; readonly dstSeqId: SeqId; readonly p0: number; readonly p1: number }
  /**
   * Replace `dst`'s cells in [p0, p1) by `src`'s, which hold the same tokens' KV at the same
   * positions (seq_rm then seq_cp): a sequence that computed a prefix the cache already held
   * shares the cache's copy and its own duplicate cells are freed.
   */
  | { readonly kind: 'adopt'; readonly srcSeqId: SeqId; readonly dstSeqId: SeqId; readonly p0: number; readonly p1: number }
  /** Drop `seqId`'s cells in [p0, p1) (a finished, aborted or preempted sequence, or an evicted cache node). */
  | { readonly kind: 'remove'; readonly seqId: SeqId; readonly p0: number; readonly p1: number }
  /** Copy all of `seqId`'s cells into host memory under `key` (the prefix cache's host tier); the cells stay. */
  | { readonly kind: 'save'; readonly seqId: SeqId; readonly key: number }
  /** Place the cells saved under `key` as `seqId`'s, which holds none; the scheduler has made room for all of them. */
  | { readonly kind: 'load'; readonly seqId: SeqId; readonly key: number }
  /** Forget what was saved under `key`. */
  | { readonly kind: 'drop'; readonly key: number };

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
  /**
   * With resetSampler, when samplerNeedsHistory(sampling): the sequence's tokens so far (prompt,
   * then output, all of them, whether computed now or cached) and how many are prompt.
   */
  readonly samplerHistory?: { readonly tokens: readonly number[]; readonly numPromptTokens: number };
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
      /** Per plan item, where its request asked for log-probabilities and a token was sampled; absent when none did. */
      readonly logprobs?: readonly (TokenLogprob | null)[];
      /** Wall time of the forward pass itself in ms (the llama runner measures it around llama_decode). */
      readonly computeMs: number;
    }
  | { readonly ok: false; readonly reason: 'no_kv_slot' | 'backend_error'; readonly message: string }
  /**
   * A KV operation failed after `appliedKvOps` of the plan's were applied (none of the batch ran):
   * the scheduler's books no longer describe the runner's cells, so the engine stops (engine.ts).
   */
  | { readonly ok: false; readonly reason: 'kv_ops_failed'; readonly appliedKvOps: number; readonly message: string };
