// The queue of waiting requests a scheduler takes (p-queue's `queueClass` idea): the scheduler
// decides when to start what is at the head; the queue decides the order. The factory builds
// one and passes it in (today always the EDF WaitQueue; flow/ and tests can pass others).
//
// Contract: `peek()` is what `pop()` returns next; `pushFront` puts a request ahead of every
// request pushed with `push` (preempted requests go back first); iteration order is unspecified.

import type { Request } from '../request.ts';

export interface RequestQueue extends Iterable<Request> {
  readonly size: number;
  /** A new arrival, placed by the queue's order. */
  push(req: Request): void;
  /** A preempted request: ahead of everything that never ran. */
  pushFront(req: Request): void;
  peek(): Request | undefined;
  pop(): Request | undefined;
  /** Removes and returns every request matching `pred` (client aborts). */
  removeWhere(pred: (req: Request) => boolean): Request[];
}
