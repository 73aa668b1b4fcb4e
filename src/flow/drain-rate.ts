// How fast flow control's slots free up: the times of the last releases in a ring, and the rate
// over them measured up to now (so a stall since the last release lowers it). Retry-After is the
// time for `n` more releases at that rate. O(1) per release and per read.

/** Releases remembered; enough to smooth a burst, few enough to follow a change within seconds. */
const WINDOW = 32;
/** Retry-After bounds, seconds. */
const MIN_RETRY_S = 1;
const MAX_RETRY_S = 600;

export class DrainRate {
  readonly #now: () => number;
  readonly #times = new Float64Array(WINDOW);
  #count = 0;

  constructor(now: () => number) {
    this.#now = now;
  }

  record(): void {
    this.#times[this.#count % WINDOW] = this.#now();
    this.#count++;
  }

  /** Releases per second over the remembered ones (0 before any). */
  perS(): number {
    const n = Math.min(this.#count, WINDOW);
    if (n === 0) return 0;
    const oldest = this.#times[this.#count >= WINDOW ? this.#count % WINDOW : 0]!;
    const spanMs = Math.max(this.#now() - oldest, 1);
    return (n * 1000) / spanMs;
  }

  /** Whole seconds until `n` more releases at the current rate, within [1, 600]; null before any release. */
  secondsFor(n: number): number | null {
    const rate = this.perS();
    if (rate === 0) return null;
    return Math.min(MAX_RETRY_S, Math.max(MIN_RETRY_S, Math.ceil(n / rate)));
  }
}
