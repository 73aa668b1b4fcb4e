// The model runner interface: the one seam between the engine's bookkeeping and a model.
//
// Invariants:
// - A runner never touches queues or decides anything: it executes the plan it is handed, in
//   order (KV operations first, then one batched forward pass), and reports what it sampled.
// - `execute` is asynchronous and never blocks the event loop for the duration of a forward pass
//   (the llama runner runs llama_decode on a worker thread; the mock runner sleeps on a timer).
// - Expected conditions are values: a forward pass the backend refuses (no KV slot) resolves with
//   `{ ok: false }`, it does not throw. A throw is a bug.

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
  /** Share the cells of `src` in [p0, p1) with `dst` (a prefix-cache hit). */
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

/** What the scheduler asks the runner to do in one step. Plain data: it can be logged and asserted on. */
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

/** A chat message as the API receives it, after validation. */
export interface ChatMessage {
  readonly role: string;
  readonly content: string;
}

/** Turns token ids back into text one token at a time, never emitting half a UTF-8 character. */
export interface IncrementalDetokenizer {
  /** Text completed by this token (possibly empty while a multi-byte character is incomplete). */
  push(token: number): string;
  /** Whatever is still buffered (replacement characters for an incomplete sequence). */
  flush(): string;
}

export interface RunnerInfo {
  /** Which runner is serving: `/stats` always says so. */
  readonly name: 'llama' | 'mock';
  /** Model name served under /v1/models. */
  readonly modelId: string;
  /** Total KV cells in the (unified) pool: the longest prompt + output any one sequence can have. */
  readonly contextTokens: number;
  /** Sequence ids available, 0..maxSequences-1. */
  readonly maxSequences: number;
  /** Token ids are in [0, vocabSize): a prompt of raw ids outside it is a 400, never a backend crash. */
  readonly vocabSize: number;
  /** Largest number of tokens one forward pass may carry. */
  readonly maxBatchTokens: number;
  /**
   * Most bytes of input text any one token stands for (the longest piece, special tokens by their
   * text), so a text of B bytes has at least ⌈B / maxTokenBytes⌉ tokens; Infinity where no such
   * bound holds. The API's pre-tokenization size checks rest on this (api/limits.ts).
   */
  readonly maxTokenBytes: number;
  /** Fewest bytes the chat template adds per message besides its content (template-probe.ts). */
  readonly templateBytesPerMessage: number;
  /** Free-form facts (model path, threads, cost model) for /stats. */
  readonly details: Readonly<Record<string, unknown>>;
}

/** A prompt's tokens, or why it cannot be encoded (an expected condition, not a bug). */
export type EncodeResult =
  | { readonly ok: true; readonly tokens: number[] }
  /** `nul_in_template`: the chat template would not carry a message's NUL bytes exactly. */
  | { readonly ok: false; readonly reason: 'nul_in_template'; readonly message: string };

export interface Runner {
  readonly info: RunnerInfo;
  /** On the calling thread: small texts only (warm-up, tests). The API uses encodeText/encodeChat. */
  tokenize(text: string, addBos: boolean): number[];
  /**
   * Tokens of `text`, never blocking the event loop for long, in time linear in its length.
   * The llama runner works on a pool thread; the mock yields between slices.
   */
  encodeText(text: string, addBos: boolean): Promise<number[]>;
  /** The chat template over the exact characters of every message (NUL included), then its tokens (BOS added). */
  encodeChat(messages: readonly ChatMessage[]): Promise<EncodeResult>;
  detokenizer(): IncrementalDetokenizer;
  /** The model's chat template applied to the messages, with the assistant turn opened. */
  applyChatTemplate(messages: readonly ChatMessage[]): string;
  /** End-of-generation token (EOS, EOT, ...). */
  isEog(token: number): boolean;
  execute(plan: RunnerPlan): Promise<StepResult>;
  close(): Promise<void>;
}

