// The paged KV block pool: fixed-size blocks, reference counts, a LIFO free list.
//
// It is the accounting model of llama.cpp's unified KV pool: `numBlocks * blockSize` cells.
// It is the only owner of reference counts (CONTRIBUTING.md, Style: one owner per piece of mutable state);
// block tables and the radix cache hold references through incRef/decRef.
//
// Invariants (checked by `checkInvariants()`):
// - a block is on the free list iff its refcount is 0, and at most once;
// - numFree + numUsed = numBlocks.
//
// Free-list order: a stack. `decRef` to 0 pushes the block on top; `allocate(n)` pops n from the
// top. So the block freed last is the block allocated next (recently freed blocks are the warm
// ones). A fresh pool hands out 0, 1, 2, ... in that order.
//
//   free stack:  [ ..., 7, 3, 5 ]  ← top      allocate(2) → [5, 3]
//
// Complexity: allocate(n) O(n); incRef, decRef, refCount, copyOnWrite O(1); checkInvariants O(numBlocks).

import { bug } from '../../util/bug.ts';

/** Index of a block in the pool (0 ≤ id < numBlocks). */
export type BlockId = number & { readonly __brand: 'BlockId' };
export const asBlockId = (n: number): BlockId => n as BlockId;

export interface BlockPoolOptions {
  /** Blocks in the pool. */
  readonly numBlocks: number;
  /** Tokens (KV cells) per block; 16 by default. */
  readonly blockSize?: number;
}

export class BlockPool {
  readonly numBlocks: number;
  readonly blockSize: number;
  #refCounts: Uint32Array;
  /** Stack of free blocks; the top (end of the array) is allocated next. */
  #freeStack: BlockId[] = [];
  #numAllocations = 0;
  #numCopyOnWrite = 0;

  constructor(options: BlockPoolOptions) {
    const { numBlocks, blockSize = 16 } = options;
    if (!Number.isSafeInteger(numBlocks) || numBlocks < 1) {
      throw new RangeError(`BlockPool: expected numBlocks to be a positive integer, got ${String(numBlocks)}`);
    }
    if (!Number.isSafeInteger(blockSize) || blockSize < 1) {
      throw new RangeError(`BlockPool: expected blockSize to be a positive integer, got ${String(blockSize)}`);
    }
    this.numBlocks = numBlocks;
    this.blockSize = blockSize;
    this.#refCounts = new Uint32Array(numBlocks);
    for (let id = numBlocks - 1; id >= 0; id--) this.#freeStack.push(asBlockId(id));
  }

  // ---- public API ----

  get numFree(): number {
    return this.#freeStack.length;
  }

  get numUsed(): number {
    return this.numBlocks - this.#freeStack.length;
  }

  /** Blocks handed out by `allocate` and `copyOnWrite` since construction. */
  get numAllocations(): number {
    return this.#numAllocations;
  }

  /** Copy-on-write operations performed since construction. */
  get numCopyOnWrite(): number {
    return this.#numCopyOnWrite;
  }

  canAllocate(numBlocks: number): boolean {
    return numBlocks >= 0 && numBlocks <= this.#freeStack.length;
  }

  /** Pops `numBlocks` blocks off the free stack, each with refcount 1. Call only when `canAllocate`. */
  allocate(numBlocks: number): BlockId[] {
    if (!Number.isSafeInteger(numBlocks) || !this.canAllocate(numBlocks)) {
      bug(`BlockPool.allocate(${numBlocks}) with ${this.numFree} free (check canAllocate first)`);
    }
    const out: BlockId[] = [];
    for (let i = 0; i < numBlocks; i++) {
      const id = this.#freeStack.pop()!;
      this.#refCounts[id] = 1;
      out.push(id);
    }
    this.#numAllocations += numBlocks;
    return out;
  }

  incRef(id: BlockId): void {
    const ref = this.#ref(id);
    if (ref === 0) bug(`BlockPool.incRef(${id}) on a free block (use after free)`);
    this.#refCounts[id] = ref + 1;
  }

  /** Drops one reference; returns true when that was the last one and the block went back on the free stack. */
  decRef(id: BlockId): boolean {
    const ref = this.#ref(id);
    if (ref === 0) bug(`BlockPool.decRef(${id}) on a free block (double free)`);
    this.#refCounts[id] = ref - 1;
    if (ref > 1) return false;
    this.#freeStack.push(id);
    return true;
  }

  refCount(id: BlockId): number {
    return this.#ref(id);
  }

  /**
   * Copy-on-write of a shared block: allocates a fresh block (refcount 1) for the writer and drops
   * the writer's reference to `id`. Requires refCount(id) > 1 and a free block (a bug otherwise).
   */
  copyOnWrite(id: BlockId): BlockId {
    if (this.#ref(id) < 2) bug(`BlockPool.copyOnWrite(${id}) of an unshared block`);
    const [copy] = this.allocate(1);
    this.decRef(id);
    this.#numCopyOnWrite++;
    return copy!;
  }

  /** The free stack in allocation order: element 0 is the block `allocate(1)` would return next. */
  freeListSnapshot(): BlockId[] {
    return this.#freeStack.slice().reverse();
  }

  /**
   * Full check, O(numBlocks). With `expectedRefs` (every holder's references, summed), also checks
   * that each block's refcount equals them exactly: nothing leaks and nothing is over-released.
   */
  checkInvariants(expectedRefs?: ReadonlyMap<BlockId, number>): void {
    const seen = new Uint8Array(this.numBlocks);
    for (const id of this.#freeStack) {
      if (seen[id] === 1) bug(`BlockPool: block ${id} is on the free list twice`);
      seen[id] = 1;
      if (this.#refCounts[id] !== 0) {
        bug(`BlockPool: free block ${id} has refcount ${this.#refCounts[id]}`);
      }
    }
    for (let id = 0; id < this.numBlocks; id++) {
      const ref = this.#refCounts[id]!;
      if (ref === 0 && seen[id] !== 1) bug(`BlockPool: block ${id} has refcount 0 but is not free (leaked)`);
      if (expectedRefs !== undefined) {
        const expected = expectedRefs.get(asBlockId(id)) ?? 0;
        if (ref !== expected) {
          bug(`BlockPool: block ${id} has refcount ${ref}, its holders account for ${expected}`);
        }
      }
    }
    if (expectedRefs !== undefined) {
      for (const id of expectedRefs.keys()) this.#ref(id);
    }
    if (this.numFree + this.numUsed !== this.numBlocks) bug('BlockPool: free + used != total');
  }

  // ---- helpers ----

  #ref(id: BlockId): number {
    const ref = this.#refCounts[id];
    if (ref === undefined || !Number.isInteger(id)) bug(`BlockPool: block id ${id} is out of range [0, ${this.numBlocks})`);
    return ref;
  }
}
