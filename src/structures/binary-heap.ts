// A binary min-heap over an injected strict order: the one heap behind the radix cache's eviction
// queue (LRU on a logical clock) and the wait queue (earliest deadline first).
//
// The order must be total and strict (`less(a, b)` and `less(b, a)` never both true); give ties
// a tie-breaker (an id, an arrival counter) so pop order is deterministic.
//
//   array  [ a0 | a1 a2 | a3 a4 a5 a6 | ... ]   children of i at 2i+1, 2i+2; a0 is the least
//
// Complexity: push O(log n), pop O(log n), peek O(1), removeWhere O(n) (filter + heapify),
// clear O(1). Items are never updated in place: callers that reorder push again and skip stale
// entries when they surface (lazy deletion).

export class BinaryHeap<T> {
  readonly #less: (a: T, b: T) => boolean;
  #a: T[] = [];

  constructor(less: (a: T, b: T) => boolean) {
    if (typeof less !== 'function') throw new TypeError(`BinaryHeap: expected a comparison function, got ${typeof less}`);
    this.#less = less;
  }

  get size(): number {
    return this.#a.length;
  }

  /** The items in heap (array) order, not sorted. */
  items(): readonly T[] {
    return this.#a;
  }

  peek(): T | undefined {
    return this.#a[0];
  }

  clear(): void {
    this.#a = [];
  }

  push(item: T): void {
    this.#a.push(item);
    this.#up(this.#a.length - 1);
  }

  pop(): T | undefined {
    const a = this.#a;
    const top = a[0];
    const last = a.pop();
    if (top === undefined || last === undefined || a.length === 0) return top;
    a[0] = last;
    this.#down(0);
    return top;
  }

  /** Removes and returns every item matching `pred`, in heap order. O(n). */
  removeWhere(pred: (item: T) => boolean): T[] {
    const gone = this.#a.filter(pred);
    if (gone.length === 0) return gone;
    this.#a = this.#a.filter((x) => !pred(x));
    for (let i = (this.#a.length >> 1) - 1; i >= 0; i--) this.#down(i);
    return gone;
  }

  #up(i: number): void {
    const a = this.#a;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!this.#less(a[i]!, a[p]!)) return;
      [a[i], a[p]] = [a[p]!, a[i]!];
      i = p;
    }
  }

  #down(i: number): void {
    const a = this.#a;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < a.length && this.#less(a[l]!, a[m]!)) m = l;
      if (r < a.length && this.#less(a[r]!, a[m]!)) m = r;
      if (m === i) return;
      [a[i], a[m]] = [a[m]!, a[i]!];
      i = m;
    }
  }
}
