// The pool of llama.cpp sequence ids (0 ≤ id < maxSequences).
//
// Invariants: every id is either free (on the stack, once) or acquired, never both;
// numFree + numAcquired = maxSequences. Who holds an acquired id — a running request, or the radix
// cache as the owner of nodes — is the holders' business; RadixCache.checkInvariants checks the
// conservation across both.
//
// Order: a stack. A fresh pool hands out 0, 1, 2, ...; a released id is the next one acquired.
// Complexity: everything O(1) but checkInvariants, O(maxSequences).

import { asSeqId, type SeqId } from '../plan.ts';
import { bug } from '../../util/bug.ts';

export interface SeqIdPoolOptions {
  /** Sequence ids available (llama.cpp's n_seq_max, at most 256 there). */
  readonly maxSequences: number;
}

export class SeqIdPool {
  readonly maxSequences: number;
  #freeStack: SeqId[] = [];
  #acquired: Uint8Array;

  constructor(options: SeqIdPoolOptions) {
    const { maxSequences } = options;
    if (!Number.isSafeInteger(maxSequences) || maxSequences < 1) {
      throw new RangeError(`SeqIdPool: expected maxSequences to be a positive integer, got ${String(maxSequences)}`);
    }
    this.maxSequences = maxSequences;
    this.#acquired = new Uint8Array(maxSequences);
    for (let id = maxSequences - 1; id >= 0; id--) this.#freeStack.push(asSeqId(id));
  }

  get numFree(): number {
    return this.#freeStack.length;
  }

  canAcquire(): boolean {
    return this.#freeStack.length > 0;
  }

  /** Call only when `canAcquire`. */
  acquire(): SeqId {
    const id = this.#freeStack.pop();
    if (id === undefined) bug('SeqIdPool.acquire with no free id (check canAcquire first)');
    this.#acquired[id] = 1;
    return id;
  }

  release(id: SeqId): void {
    if (!this.isAcquired(id)) bug(`SeqIdPool.release(${id}) of an id that is not acquired (double release)`);
    this.#acquired[id] = 0;
    this.#freeStack.push(id);
  }

  isAcquired(id: SeqId): boolean {
    const flag = this.#acquired[id];
    if (flag === undefined || !Number.isInteger(id)) bug(`SeqIdPool: sequence id ${id} is out of range [0, ${this.maxSequences})`);
    return flag === 1;
  }

  checkInvariants(): void {
    const seen = new Uint8Array(this.maxSequences);
    for (const id of this.#freeStack) {
      if (seen[id] === 1) bug(`SeqIdPool: id ${id} is free twice`);
      if (this.#acquired[id] === 1) bug(`SeqIdPool: id ${id} is both free and acquired`);
      seen[id] = 1;
    }
    for (let id = 0; id < this.maxSequences; id++) {
      if (seen[id] !== 1 && this.#acquired[id] !== 1) bug(`SeqIdPool: id ${id} is neither free nor acquired`);
    }
  }
}
