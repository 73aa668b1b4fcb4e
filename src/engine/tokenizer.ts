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

export interface Tokenizer {
  /** Token ids are in [0, vocabSize). */
  readonly vocabSize: number;
  tokenize(text: string, addBos: boolean): number[];
  /** The model's chat template applied to the messages, with the assistant turn opened. */
  applyChatTemplate(messages: readonly ChatMessage[]): string;
  detokenizer(): IncrementalDetokenizer;
  /** End-of-generation token (EOS, EOT, ...). */
  isEog(token: number): boolean;
}
