// Text ↔ tokens, apart from the runner that executes steps: the API prepares prompts and turns
// sampled ids back into text with a Tokenizer; the engine only ever sees token ids.
//
// Invariants: `tokenize` and `applyChatTemplate` are pure functions of their input (the same text
// gives the same ids); a detokenizer never emits half a UTF-8 character.

/** A chat message as the API receives it, after validation. */
export interface ChatMessage {
  readonly role: string;
  readonly content: string;
  /** An assistant turn's tool calls (OpenAI's shape: arguments as a JSON string). */
  readonly toolCalls?: readonly { readonly id: string; readonly name: string; readonly arguments: string }[];
  /** A `tool` message: the call it answers. */
  readonly toolCallId?: string;
  /** The author's or the tool's name. */
  readonly name?: string;
  /** An assistant turn's reasoning, where the template renders it. */
  readonly reasoningContent?: string;
}

/** A function the model may call (OpenAI's `tools[].function`). */
export interface ChatTool {
  readonly name: string;
  readonly description?: string;
  /** JSON Schema of the arguments. */
  readonly parameters?: unknown;
}

/** A conversation as the chat template receives it. */
export interface ChatRequest {
  readonly messages: readonly ChatMessage[];
  readonly tools?: readonly ChatTool[];
  /** A named function is passed as 'required' with only that tool. */
  readonly toolChoice?: 'none' | 'auto' | 'required';
  readonly parallelToolCalls?: boolean;
  /** Extra variables for the template (`enable_thinking`, ...). */
  readonly templateKwargs?: Readonly<Record<string, unknown>>;
  readonly reasoningEffort?: string;
}

/**
 * What a model's chat format asks of sampling and parsing for one request (llama.cpp's chat code
 * decides it from the template): a tool-call grammar, lazy (only after a trigger) or not, stop
 * strings, tokens the detokenizer renders as text, and how to parse the output.
 */
export interface ChatFormat {
  /** e.g. 'peg-native', 'Content-only'. */
  readonly name: string;
  readonly grammar?: string;
  readonly grammarLazy?: { readonly patterns: readonly string[]; readonly tokens: readonly number[] };
  readonly grammarPrefill?: readonly number[];
  readonly additionalStops: readonly string[];
  /** Special tokens the output parser needs to see (rendered as text by the detokenizer). */
  readonly preservedTokens: readonly number[];
  /** The output may hold tool calls to parse. */
  readonly parseToolCalls: boolean;
  /** The output may open with a reasoning block (the template thinks), parsed into reasoning_content. */
  readonly reasoning: boolean;
  /** Opaque to JS: what the runner's output parser is built from. */
  readonly parserParams: string;
}

/** One choice's output parsed as its chat format says; fed text as it arrives. */
export interface ChatOutputParser {
  /** Adds text and parses everything so far; `final` on the last call. */
  update(textAdded: string, final: boolean): ParsedChatOutput;
}

export interface ParsedChatOutput {
  readonly content: string;
  readonly reasoningContent?: string;
  readonly toolCalls: readonly { readonly id: string; readonly name: string; readonly arguments: string }[];
  /** What changed since the previous call, in order (stream deltas). */
  readonly deltas: readonly ChatOutputDelta[];
  /** The text does not parse in the format (the model broke it); content then holds what parsed. */
  readonly error?: string;
}

export type ChatOutputDelta =
  | { readonly kind: 'content'; readonly text: string }
  | { readonly kind: 'reasoning'; readonly text: string }
  | { readonly kind: 'tool_call'; readonly index: number; readonly id?: string; readonly name?: string; readonly arguments: string };

/** Turns token ids back into text one token at a time, never emitting half a UTF-8 character. */
export interface IncrementalDetokenizer {
  /** Text completed by this token (possibly empty while a multi-byte character is incomplete). */
  push(token: number): string;
  /** Whatever is still buffered (replacement characters for an incomplete sequence). */
  flush(): string;
}

/** A prompt's tokens, or why it cannot be encoded (an expected condition, not a bug). */
export type EncodeResult =
  | { readonly ok: true; readonly tokens: number[]; readonly format?: ChatFormat }
  /** `invalid_request`: the chat code refuses the conversation; `template_error`: the template raised an error on it. */
  | { readonly ok: false; readonly reason: 'invalid_request' | 'template_error'; readonly message: string };

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
  /**
   * The chat template over the exact characters of every message (NUL included), then its tokens
   * (BOS as the vocabulary asks); text in a message that spells a control token stays text unless
   * the tokenizer was built to parse it.
   */
  encodeChat(chat: ChatRequest): Promise<EncodeResult>;
  /** The model's chat template applied to the messages, with the assistant turn opened. */
  applyChatTemplate(messages: readonly ChatMessage[]): string;
  /** Tools and output parsing (absent on the mock, so the API refuses `tools` there). */
  openChatParser?(format: ChatFormat): ChatOutputParser;
  /** `asText`: control tokens rendered as their text instead of nothing (a chat format's markup). */
  detokenizer(asText?: readonly number[]): IncrementalDetokenizer;
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
