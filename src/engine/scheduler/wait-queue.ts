// The wait queue: earliest deadline first (deadline = arrival + SLO), ties by arrival order,
// plus a front lane for preempted requests, which go back ahead of everything that has not run.
//
// push/pop O(log n) (binary heap); pushFront/popFront O(1) amortised. Requests whose client left
// are removed in O(n) by `removeWhere`, which the scheduler runs before it batches.

import type { Request } from '../request.ts';

export class WaitQueue {
  #heap: { req: Request; order: number }[] = [];
  #front: Request[] = [];
  #order = 0;

  get size(): number {
    return this.#heap.length + this.#front.length;
  }

  push(req: Request): void {
    this.#heap.push({ req, order: this.#order++ });
    this.#up(this.#heap.length - 1);
  }

  /** A preempted request: ahead of every request that never ran. The most recently preempted goes first. */
  pushFront(req: Request): void {
    this.#front.push(req);
  }

  peek(): Request | undefined {
    return this.#front.at(-1) ?? this.#heap[0]?.req;
  }

  pop(): Request | undefined {
    if (this.#front.length > 0) return this.#front.pop();
    const top = this.#heap[0];
    if (top === undefined) return undefined;
    const last = this.#heap.pop()!;
    if (this.#heap.length > 0) {
      this.#heap[0] = last;
      this.#down(0);
    }
    return top.req;
  }

  /** Remove and return every request matching `pred` (O(n)). */
  removeWhere(pred: (r: Request) => boolean): Request[] {
    const gone = [...this.#front.filter(pred), ...this.#heap.filter((e) => pred(e.req)).map((e) => e.req)];
    if (gone.length === 0) return gone;
    this.#front = this.#front.filter((r) => !pred(r));
    const kept = this.#heap.filter((e) => !pred(e.req));
    this.#heap = [];
    for (const e of kept) {
      this.#heap.push(e);
      this.#up(this.#heap.length - 1);
    }
    return gone;
  }

  /** Requests in no particular order (for snapshots). */
  *[Symbol.iterator](): IterableIterator<Request> {
    yield* this.#front;
    for (const e of this.#heap) yield e.req;
  }

  #less(a: number, b: number): boolean {
    const x = this.#heap[a]!;
    const y = this.#heap[b]!;
    return x.req.deadlineMs !== y.req.deadlineMs ? x.req.deadlineMs < y.req.deadlineMs : x.order < y.order;
  }

  #swap(a: number, b: number): void {
    const t = this.#heap[a]!;
    this.#heap[a] = this.#heap[b]!;
    this.#heap[b] = t;
  }

  #up(i: number): void {
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.#less(i, parent)) return;
      this.#swap(i, parent);
      i = parent;
    }
  }

  #down(i: number): void {
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < this.#heap.length && this.#less(l, m)) m = l;
      if (r < this.#heap.length && this.#less(r, m)) m = r;
      if (m === i) return;
      this.#swap(i, m);
      i = m;
    }
  }
}
