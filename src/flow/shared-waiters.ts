// The requests a replica has granted locally and that wait for a shared reservation: one FIFO per
// band, served highest band first, each band in the order the local stage granted them (which is
// already its tenant round-robin). Leaving from the middle (client gone, TTL) is lazy: the entry is
// marked and the count drops at once; a FIFO is compacted when gone entries outnumber live ones.
//
// Cost: push and take O(1) amortized; `ordered` is O(waiting) — bounded by the local caps, since
// every entry holds a local slot.

import { bug } from '../util/bug.ts';
import { Fifo } from './fifo.ts';

export interface WaitingEntry {
  readonly req: { readonly band: number };
  state: 'waiting' | 'granted' | 'gone';
}

export class SharedWaiters<E extends WaitingEntry> {
  readonly #bands: Fifo<E>[];
  #numWaiting = 0;

  constructor(numBands: number) {
    this.#bands = Array.from({ length: numBands }, () => new Fifo<E>());
  }

  get numWaiting(): number {
    return this.#numWaiting;
  }

  push(e: E): void {
    if (e.state !== 'waiting') bug(`SharedWaiters.push of an entry already ${e.state}`);
    this.#bands[e.req.band]!.push(e);
    this.#numWaiting++;
  }

  /** The entry leaves (granted or gone); false if it had already left. */
  take(e: E, to: 'granted' | 'gone'): boolean {
    if (e.state !== 'waiting') return false;
    e.state = to;
    this.#numWaiting--;
    const fifo = this.#bands[e.req.band]!;
    if (fifo.length > 2 * this.#numWaiting + 16) fifo.retain((x) => x.state === 'waiting');
    return true;
  }

  /** Up to `max` waiting entries, highest band first, each band in arrival order (dropping gone heads). */
  ordered(max = Infinity): E[] {
    const out: E[] = [];
    for (let b = this.#bands.length - 1; b >= 0 && out.length < max; b--) {
      const fifo = this.#bands[b]!;
      while (fifo.peek() !== undefined && fifo.peek()!.state !== 'waiting') fifo.shift();
      for (const e of fifo) {
        if (out.length >= max) break;
        if (e.state === 'waiting') out.push(e);
      }
    }
    return out;
  }
}
