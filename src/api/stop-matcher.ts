// Stop strings over a token stream. Text that could still turn into a stop string is held back,
// so a stop split across tokens never leaks its first half to the client; when a stop string
// completes, everything before it is released and the rest (the stop string included) is dropped.
//
// Cost per push: O(buffer × stops × maxStopLength), and the buffer never exceeds the longest stop
// string plus one push, so it is bounded by the (at most 4, short) stop strings.

export interface StopPush {
  /** Text that is safe to send now. */
  readonly text: string;
  /** A stop string completed: the request ends with finish_reason "stop". */
  readonly stopped: boolean;
}

export class StopMatcher {
  readonly #stops: readonly string[];
  #held = '';

  constructor(stops: readonly string[]) {
    if (stops.some((s) => s.length === 0)) throw new Error('StopMatcher: expected non-empty stop strings');
    this.#stops = stops;
  }

  push(text: string): StopPush {
    if (this.#stops.length === 0) return { text, stopped: false };
    const buf = this.#held + text;
    let first = -1;
    for (const s of this.#stops) {
      const at = buf.indexOf(s);
      if (at >= 0 && (first < 0 || at < first)) first = at;
    }
    if (first >= 0) {
      this.#held = '';
      return { text: buf.slice(0, first), stopped: true };
    }
    const keep = this.#longestStopPrefixSuffix(buf);
    this.#held = buf.slice(buf.length - keep);
    return { text: buf.slice(0, buf.length - keep), stopped: false };
  }

  /** Text still held back when generation ends for another reason. */
  flush(): string {
    const t = this.#held;
    this.#held = '';
    return t;
  }

  /** Length of the longest suffix of buf that is a proper prefix of some stop string. */
  #longestStopPrefixSuffix(buf: string): number {
    let best = 0;
    for (const s of this.#stops) {
      for (let k = Math.min(s.length - 1, buf.length); k > best; k--) {
        if (buf.endsWith(s.slice(0, k))) {
          best = k;
          break;
        }
      }
    }
    return best;
  }
}
