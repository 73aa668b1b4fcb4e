// The wait queue: earliest deadline first (deadline = arrival + SLO), ties by arrival order,
// plus a front lane for preempted requests, which go back ahead of everything that has not run
// (the most recently preempted first).
//
// push/pop O(log n) (the shared binary heap); pushFront/popFront O(1) amortised. Requests whose
// client left are removed in O(n) by `removeWhere`, which the scheduler runs before it batches.

import { BinaryHeap } from '../../structures/binary-heap.ts';
import type { Request } from '../request.ts';
import type { RequestQueue } from './request-queue.ts';

interface Entry {
  readonly req: Request;
  /** Arrival order: the tie-breaker between equal deadlines. */
  readonly order: number;
}

const edfLess = (x: Entry, y: Entry): boolean => (x.req.deadlineMs !== y.req.deadlineMs ? x.req.deadlineMs < y.req.deadlineMs : x.order < y.order);

export class WaitQueue implements RequestQueue {
  readonly #heap = new BinaryHeap<Entry>(edfLess);
  #front: Request[] = [];
  #order = 0;

  get size(): number {
    return this.#heap.size + this.#front.length;
  }

  push(req: Request): void {
    this.#heap.push({ req, order: this.#order++ });
  }

  pushFront(req: Request): void {
    this.#front.push(req);
  }

  peek(): Request | undefined {
    return this.#front.at(-1) ?? this.#heap.peek()?.req;
  }

  pop(): Request | undefined {
    return this.#front.pop() ?? this.#heap.pop()?.req;
  }

  removeWhere(pred: (r: Request) => boolean): Request[] {
    const gone = this.#front.filter(pred);
    if (gone.length > 0) this.#front = this.#front.filter((r) => !pred(r));
    for (const e of this.#heap.removeWhere((e) => pred(e.req))) gone.push(e.req);
    return gone;
  }

  /** Requests in no particular order (for snapshots). */
  *[Symbol.iterator](): IterableIterator<Request> {
    yield* this.#front;
    for (const e of this.#heap.items()) yield e.req;
  }
}
