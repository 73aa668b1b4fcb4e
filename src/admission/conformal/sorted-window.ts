// The last `capacity` scores, in arrival order and in sorted order at once, so the k-th smallest is
// an array read and nothing on the decision path ever sorts.
//
//   ring (arrival order):  [ s5 s6 s2 s3 s4 ]   head → s2 (oldest, evicted next)
//   sorted (ascending):    [ s2 s4 s6 s3 s5 ]   (values, not positions)
//
// push(x): when full, the oldest score is found in `sorted` by binary search and removed with one
// copyWithin; x is inserted at its binary-search position with another. O(log N) search plus
// O(N) memmove — 0.54 µs median per push at N = 5,000 (bench/admission/conformal-cost.ts), and kth() stays
// O(1). An order-statistics tree would make push O(log N) too, at the cost of a pointer structure
// and slower reads; the measurement says it is not needed.
//
// Invariants (checkInvariants): 0 ≤ size ≤ capacity; sorted[0..size) is ascending and is a
// permutation of the ring's live entries.

import { bug } from '../../util/bug.ts';

export class SortedWindow {
  readonly capacity: number;
  /** Arrival order; the live entries are the `size` slots ending just before #next. */
  readonly #ring: Float64Array;
  /** Ascending; the first `size` slots are live. */
  readonly #sorted: Float64Array;
  /** Ring slot the next push writes. */
  #next = 0;
  #size = 0;

  constructor(capacity: number) {
    if (!Number.isSafeInteger(capacity) || capacity < 1) {
      throw new RangeError(`SortedWindow: expected capacity to be a positive integer, got ${String(capacity)}`);
    }
    this.capacity = capacity;
    this.#ring = new Float64Array(capacity);
    this.#sorted = new Float64Array(capacity);
  }

  get size(): number {
    return this.#size;
  }

  /** The k-th smallest live score, 1-based (1 ≤ k ≤ size). */
  kth(k: number): number {
    if (!(Number.isInteger(k) && k >= 1 && k <= this.#size)) bug(`kth(${k}) of a window holding ${this.#size}`);
    return this.#sorted[k - 1]!;
  }

  /** Adds x, evicting the oldest score when full. NaN is a bug (it would break the order). */
  push(x: number): void {
    if (Number.isNaN(x)) bug('NaN pushed into a SortedWindow');
    const sorted = this.#sorted;
    if (this.#size === this.capacity) {
      const old = this.#ring[this.#next]!;
      const at = lowerBound(sorted, this.#size, old);
      if (sorted[at] !== old) bug(`evicted score ${old} not in the sorted view`);
      sorted.copyWithin(at, at + 1, this.#size);
      this.#size--;
    }
    const at = upperBound(sorted, this.#size, x);
    sorted.copyWithin(at + 1, at, this.#size);
    sorted[at] = x;
    this.#size++;
    this.#ring[this.#next] = x;
    this.#next = (this.#next + 1) % this.capacity;
  }

  /** Live scores, oldest first (for tests and snapshots; allocates). */
  toArray(): number[] {
    const out: number[] = [];
    const start = (this.#next - this.#size + this.capacity) % this.capacity;
    for (let i = 0; i < this.#size; i++) out.push(this.#ring[(start + i) % this.capacity]!);
    return out;
  }

  /** Full check, O(N log N): for tests after every operation. */
  checkInvariants(): void {
    if (this.#size < 0 || this.#size > this.capacity) bug(`SortedWindow size ${this.#size} of ${this.capacity}`);
    const live = this.toArray().sort((a, b) => a - b);
    for (let i = 0; i < this.#size; i++) {
      if (this.#sorted[i] !== live[i]) bug(`SortedWindow sorted view differs from the ring at ${i}`);
    }
  }
}

/** First index in a[0..n) with a[i] ≥ x. */
function lowerBound(a: Float64Array, n: number, x: number): number {
  let lo = 0;
  let hi = n;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (a[mid]! < x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** First index in a[0..n) with a[i] > x. */
function upperBound(a: Float64Array, n: number, x: number): number {
  let lo = 0;
  let hi = n;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (a[mid]! <= x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
