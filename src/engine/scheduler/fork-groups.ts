// Parallel sampling (n > 1) without computing the prompt n times: the first choice (the leader)
// prefills all but the last prompt token; the other choices wait here, parked on it, and are then
// forked from its sequence (a seq_cp of those cells; copy-on-write in the block accounting). Each
// choice then computes the last prompt token itself and samples with its own seed, so the prompt
// costs P − 1 + n tokens of compute instead of n·P.
//
// Invariants: a parked request is WAITING and is in no queue; a leader with parked followers is
// fed no further than P − 1 tokens until they are forked or released. Followers that cannot be
// forked (no sequence id, no blocks, running set full) or whose leader ends first go to the wait
// queue and compute their prompt themselves. O(1) to park and to look a leader up.

import type { Request } from '../request.ts';

export class ForkGroups {
  readonly #parked = new Map<Request, Request[]>();
  #size = 0;

  /** Followers parked, all leaders together. */
  get size(): number {
    return this.#size;
  }

  /** Park `req` on its leader when that can save prompt compute; false: schedule it on its own. */
  park(req: Request): boolean {
    const leader = req.forkOf;
    if (leader === null || leader.numPromptTokens < 2 || leader.abortRequested) return false;
    if (leader.numComputedTokens >= leader.numPromptTokens - 1) return false; // too late to share
    const list = this.#parked.get(leader);
    if (list === undefined) this.#parked.set(leader, [req]);
    else list.push(req);
    this.#size++;
    return true;
  }

  /** Most prompt tokens `req` may be fed now: a leader stops one short of its prompt until its followers are forked. */
  capFor(req: Request, n: number): number {
    if (!this.#parked.has(req)) return n;
    return Math.min(n, req.numPromptTokens - 1 - req.numComputedTokens);
  }

  /** The leader has all but its last prompt token in KV: its followers, to fork now (and forget). */
  takeReady(leader: Request): Request[] | null {
    const list = this.#parked.get(leader);
    if (list === undefined || leader.numComputedTokens !== leader.numPromptTokens - 1) return null;
    this.#parked.delete(leader);
    this.#size -= list.length;
    return list;
  }

  /** The leader ended before its followers were forked: they go on alone. */
  release(leader: Request): Request[] {
    const list = this.#parked.get(leader) ?? [];
    this.#parked.delete(leader);
    this.#size -= list.length;
    return list;
  }

  /** Remove and return parked followers matching `pred` (aborted ones, before a batch). */
  removeWhere(pred: (r: Request) => boolean): Request[] {
    const out: Request[] = [];
    for (const [leader, list] of this.#parked) {
      const keep = list.filter((r) => !pred(r));
      if (keep.length === list.length) continue;
      out.push(...list.filter(pred));
      if (keep.length === 0) this.#parked.delete(leader);
      else this.#parked.set(leader, keep);
    }
    this.#size -= out.length;
    return out;
  }

  /** Leaders with parked followers (for the invariant check). */
  *entries(): IterableIterator<[Request, readonly Request[]]> {
    yield* this.#parked;
  }
}
