// Text ↔ tokens, apart from the runner that executes steps: the API prepares prompts and turns
// sampled ids back into text with a Tokenizer; the engine only ever sees token ids.
//
// Invariants: `tokenize` and `applyChatTemplate` are pure functions of their input (the same text
// gives the same ids); a detokenizer never emits half a UTF-8 character.

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

/** A prompt's tokens, or why it cannot be encoded (an expected condition, not a bug). */
export type EncodeResult =
  | { readonly ok: true; readonly tokens: number[] }
  /** `nul_in_template`: the chat template would not carry a message's NUL bytes exactly. */
  | { readonly ok: false; readonly reason: 'nul_in_template'; readonly message: string };

export interface Tokenizer {
  /** Token ids are in [0, vocabSize). */
  readonly vocabSize: number;
  /**
   * Most bytes of input text any one token stands for (the longest piece, special tokens by their
   * text), so a text of B bytes has at least ⌈B / maxTokenBytes⌉ tokens; Infinity where no such
   * bound holds. The API's pre-tokenization size checks rest on this (api/limits.ts).
   */
  readonly maxTokenBytes: number;
  /** Fewest bytes the chat template adds per message besides its content (runner/template-probe.ts). */
  readonly templateBytesPerMessage: number;
  /** On the calling thread: small texts only (warm-up, tests). Requests use encodeText/encodeChat. */
  tokenize(text: string, addBos: boolean): number[];
  /**
   * Tokens of `text`, never blocking the event loop for long, in time linear in its length (the
   * llama tokenizer works on a pool thread; the mock yields between slices).
   */
  encodeText(text: string, addBos: boolean): Promise<number[]>;
  /** The chat template over the exact characters of every message (NUL included), then its tokens (BOS added). */
  encodeChat(messages: readonly ChatMessage[]): Promise<EncodeResult>;
  /** The model's chat template applied to the messages, with the assistant turn opened. */
  applyChatTemplate(messages: readonly ChatMessage[]): string;
  detokenizer(): IncrementalDetokenizer;
  /** The raw bytes one token stands for (possibly part of a UTF-8 character; none for control tokens): log-probability entries name tokens by these. */
  tokenBytes(token: number): Uint8Array;
  /**
   * Whether the model's grammar sampler accepts a GBNF grammar (root rule `root`) for this
   * vocabulary; absent where the runner has no grammar sampler (the mock), so response_format is refused.
   */
  readonly checkGrammar?: (gbnf: string) => boolean;
  /** End-of-generation token (EOS, EOT, ...). */
  isEog(token: number): boolean;
}
