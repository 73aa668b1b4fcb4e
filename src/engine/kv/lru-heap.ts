// A binary min-heap of (stamp, id, item) entries: the radix cache's queue of evictable leaves.
//
// Entries are never updated in place. The cache pushes a fresh entry whenever a node becomes an
// evictable leaf, and drops stale ones (the node was touched, locked, grew a child or is gone)
// when they reach the top: lazy deletion. Ordering is by stamp, then id, so it is total and
// deterministic.
//
// Complexity: push O(log n), pop O(log n), peek O(1).

export interface HeapEntry<T> {
  /** Logical-clock time of the item's last access when the entry was pushed. */
  readonly stamp: number;
  /** Tie-breaker. */
  readonly id: number;
  readonly item: T;
}

export class LruHeap<T> {
  #a: HeapEntry<T>[] = [];

  get size(): number {
    return this.#a.length;
  }

  entries(): readonly HeapEntry<T>[] {
    return this.#a;
  }

  clear(): void {
    this.#a = [];
  }

  push(entry: HeapEntry<T>): void {
    const a = this.#a;
    a.push(entry);
    let i = a.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!less(a[i]!, a[p]!)) break;
      [a[i], a[p]] = [a[p]!, a[i]!];
      i = p;
    }
  }

  pop(): HeapEntry<T> | undefined {
    const a = this.#a;
    const top = a[0];
    const last = a.pop();
    if (top === undefined || last === undefined || a.length === 0) return top;
    a[0] = last;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < a.length && less(a[l]!, a[m]!)) m = l;
      if (r < a.length && less(a[r]!, a[m]!)) m = r;
      if (m === i) break;
      [a[i], a[m]] = [a[m]!, a[i]!];
      i = m;
    }
    return top;
  }
}

function less<T>(x: HeapEntry<T>, y: HeapEntry<T>): boolean {
  return x.stamp < y.stamp || (x.stamp === y.stamp && x.id < y.id);
}
