// One choice's text, after the step: token ids in, text out. Detokenizes incrementally (never half
// a UTF-8 character), holds back what could still become a stop string, and counts the tokens the
// client is billed for (up to and including the one that completed a stop string; an ending EOG
// token counts but has no text). Once it has stopped, later tokens are ignored: the backend was
// told to stop, and a step or two may already be under way.
//
// With log-probabilities asked for, each billed token's entry (an ending EOG token has none: it has
// no text) waits in `takeLogprobs()`, named by its bytes (logprob-format.ts frames them).

import type { Tokenizer } from '../engine/tokenizer.ts';
import { StopMatcher } from './stop-matcher.ts';
import type { TokenLogprob } from '../engine/plan.ts';
import type { LogprobEntry } from './logprob-format.ts';
import { logprobEntry } from './logprob-format.ts';

export class ChoiceStream {
  readonly #tokenizer: Tokenizer;
  readonly #detok;
  readonly #stop: StopMatcher;
  readonly #ignoreEos: boolean;
  #numTokens = 0;
  #stopped = false;
  #logprobs: LogprobEntry[] = [];

  /** `asText`: control tokens to render as their text (a chat format's markup, which its parser reads). */
  constructor(tokenizer: Tokenizer, stop: readonly string[], ignoreEos: boolean, asText?: readonly number[]) {
    this.#tokenizer = tokenizer;
    this.#detok = tokenizer.detokenizer(asText);
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
  push(tokenIds: readonly number[], logprobs?: readonly (TokenLogprob | null)[]): string {
    let text = '';
    for (let i = 0; i < tokenIds.length; i++) {
      const t = tokenIds[i]!;
      if (this.#stopped) break;
      this.#numTokens++;
      if (!this.#ignoreEos && this.#tokenizer.isEog(t)) continue;
      const lp = logprobs?.[i];
      if (lp != null) this.#logprobs.push(logprobEntry(this.#tokenizer, t, lp));
      const r = this.#stop.push(this.#detok.push(t));
      text += r.text;
      if (r.stopped) this.#stopped = true;
    }
    return text;
  }

  /** Log-probability entries of the tokens pushed since the last call, in order. */
  takeLogprobs(): LogprobEntry[] {
    const out = this.#logprobs;
    this.#logprobs = [];
    return out;
  }

  /** The end: whatever is held back (nothing after a stop string, which is never sent). */
  flush(): string {
    if (this.#stopped) return '';
    const tail = this.#stop.flush() + this.#detok.flush();
    return tail;
  }
}
