// One choice's text, after the step: token ids in, text out. Detokenizes incrementally (never half
// a UTF-8 character), holds back what could still become a stop string, and counts the tokens the
// client is billed for (up to and including the one that completed a stop string; an ending EOG
// token counts but has no text). Once it has stopped, later tokens are ignored: the backend was
// told to stop, and a step or two may already be under way.

import type { Tokenizer } from '../engine/tokenizer.ts';
import { StopMatcher } from './stop-matcher.ts';

export class ChoiceStream {
  readonly #tokenizer: Tokenizer;
  readonly #detok;
  readonly #stop: StopMatcher;
  readonly #ignoreEos: boolean;
  #numTokens = 0;
  #stopped = false;

  constructor(tokenizer: Tokenizer, stop: readonly string[], ignoreEos: boolean) {
    this.#tokenizer = tokenizer;
    this.#detok = tokenizer.detokenizer();
    this.#stop = new StopMatcher(stop);
    this.#ignoreEos = ignoreEos;
  }

  /** Completion tokens billed so far. */
  get numTokens(): number {
    return this.#numTokens;
  }

  /** A stop string completed: the choice is over with finish_reason "stop". */
  get stopped(): boolean {
    return this.#stopped;
  }

  /** Text safe to send for these tokens (empty while held back or once stopped). */
  push(tokenIds: readonly number[]): string {
    let text = '';
    for (const t of tokenIds) {
      if (this.#stopped) break;
      this.#numTokens++;
      if (!this.#ignoreEos && this.#tokenizer.isEog(t)) continue;
      const r = this.#stop.push(this.#detok.push(t));
      text += r.text;
      if (r.stopped) this.#stopped = true;
    }
    return text;
  }

  /** The end: whatever is held back (nothing after a stop string, which is never sent). */
  flush(): string {
    if (this.#stopped) return '';
    const tail = this.#stop.flush() + this.#detok.flush();
    return tail;
  }
}
