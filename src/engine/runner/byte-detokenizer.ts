// Incremental detokenization for byte-fallback vocabularies: each token's raw bytes go through a
// UTF-8 accumulator, so a character split across byte tokens is emitted only once it is whole.
import type { IncrementalDetokenizer } from '../tokenizer.ts';
import { Utf8Accumulator } from './utf8-accumulator.ts';

export class ByteDetokenizer implements IncrementalDetokenizer {
  readonly #pieceOf: (token: number) => Uint8Array;
  readonly #acc = new Utf8Accumulator();

  /** `pieceOf` returns a token's raw bytes (the runner caches them). */
  constructor(pieceOf: (token: number) => Uint8Array) {
    this.#pieceOf = pieceOf;
  }

  push(token: number): string {
    return this.#acc.push(this.#pieceOf(token));
  }

  flush(): string {
    return this.#acc.flush();
  }
}
