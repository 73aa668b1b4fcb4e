// The contiguous KV allocator, kept as the ablation baseline for the paged pool.
//
// Each sequence reserves one contiguous slab of cells when it starts, sized for its prompt plus the
// server-wide output cap (`maxOutputTokens`), whether or not it will use them: the waste the paged
// pool removes. Placement is first fit over a list of free ranges sorted by start; a freed slab
// coalesces with free neighbours.
//
//   cells:  [ slab A ][ free ][ slab B ][ free ........ ]
//   free ranges (sorted, never adjacent): {start, numCells}, ...
//
// Invariants (checked by `checkInvariants()`): free ranges are sorted, non-empty, non-overlapping
// and never adjacent (coalesced); slabs and free ranges tile [0, numCells) exactly.
// Complexity, with r free ranges and s slabs: canAllocate O(r); allocate O(r); free O(r)
// (binary search plus an array splice); numUnusableFreeCells O(r); checkInvariants O((r + s) log(r + s)).

import { bug } from '../../util/bug.ts';

export interface ContiguousAllocatorOptions {
  /** Cells (token slots) in the pool. */
  readonly numCells: number;
  /** Output tokens reserved for every sequence: the server-wide max_tokens cap. */
  readonly maxOutputTokens: number;
}

/** A reserved range [start, start + numCells). */
export interface Slab {
  readonly start: number;
  readonly numCells: number;
}

interface FreeRange {
  start: number;
  numCells: number;
}

export class ContiguousAllocator {
  readonly numCells: number;
  readonly maxOutputTokens: number;
  /** Sorted by start, coalesced. */
  #free: FreeRange[];
  /** start → numCells of every reserved slab. */
  #slabs = new Map<number, number>();
  #numFreeCells: number;

  constructor(options: ContiguousAllocatorOptions) {
    const { numCells, maxOutputTokens } = options;
    if (!Number.isSafeInteger(numCells) || numCells < 1) {
      throw new RangeError(`ContiguousAllocator: expected numCells to be a positive integer, got ${String(numCells)}`);
    }
    if (!Number.isSafeInteger(maxOutputTokens) || maxOutputTokens < 0) {
      throw new RangeError(`ContiguousAllocator: expected maxOutputTokens to be a non-negative integer, got ${String(maxOutputTokens)}`);
    }
    this.numCells = numCells;
    this.maxOutputTokens = maxOutputTokens;
    this.#free = [{ start: 0, numCells }];
    this.#numFreeCells = numCells;
  }

  // ---- public API ----

  get numFreeCells(): number {
    return this.#numFreeCells;
  }

  get numSlabs(): number {
    return this.#slabs.size;
  }

  get largestFreeRange(): number {
    let best = 0;
    for (const r of this.#free) best = Math.max(best, r.numCells);
    return best;
  }

  /** Cells a sequence with this prompt reserves. */
  slabCells(numPromptTokens: number): number {
    return numPromptTokens + this.maxOutputTokens;
  }

  canAllocate(numPromptTokens: number): boolean {
    return this.#firstFit(this.slabCells(numPromptTokens)) >= 0;
  }

  /** Reserves a slab (first fit). Call only when `canAllocate`. */
  allocate(numPromptTokens: number): Slab {
    if (!Number.isSafeInteger(numPromptTokens) || numPromptTokens < 0) {
      bug(`ContiguousAllocator.allocate: numPromptTokens must be a non-negative integer, got ${numPromptTokens}`);
    }
    const size = this.slabCells(numPromptTokens);
    const i = this.#firstFit(size);
    const range = this.#free[i];
    if (range === undefined || size === 0) {
      bug(`ContiguousAllocator.allocate(${size} cells) with no fitting range (check canAllocate first)`);
    }
    const slab: Slab = { start: range.start, numCells: size };
    range.start += size;
    range.numCells -= size;
    if (range.numCells === 0) this.#free.splice(i, 1);
    this.#slabs.set(slab.start, size);
    this.#numFreeCells -= size;
    return slab;
  }

  free(slab: Slab): void {
    if (this.#slabs.get(slab.start) !== slab.numCells) {
      bug(`ContiguousAllocator.free of slab [${slab.start}, +${slab.numCells}) that is not reserved (double free)`);
    }
    this.#slabs.delete(slab.start);
    this.#numFreeCells += slab.numCells;
    // Insert at the first range starting after the slab, then merge with both neighbours.
    let lo = 0;
    let hi = this.#free.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.#free[mid]!.start < slab.start) lo = mid + 1;
      else hi = mid;
    }
    const prev = this.#free[lo - 1];
    const next = this.#free[lo];
    const touchesPrev = prev !== undefined && prev.start + prev.numCells === slab.start;
    const touchesNext = next !== undefined && slab.start + slab.numCells === next.start;
    if (touchesPrev && touchesNext) {
      prev.numCells += slab.numCells + next.numCells;
      this.#free.splice(lo, 1);
    } else if (touchesPrev) {
      prev.numCells += slab.numCells;
    } else if (touchesNext) {
      next.start = slab.start;
      next.numCells += slab.numCells;
    } else {
      this.#free.splice(lo, 0, { start: slab.start, numCells: slab.numCells });
    }
  }

  /** Free cells lying in ranges too short for a request of `numCellsWanted` cells. */
  numUnusableFreeCells(numCellsWanted: number): number {
    let n = 0;
    for (const r of this.#free) if (r.numCells < numCellsWanted) n += r.numCells;
    return n;
  }

  /** External fragmentation for the largest request: unusable free cells / free cells (0 when nothing is free). */
  fragmentation(numCellsWanted: number): number {
    return this.#numFreeCells === 0 ? 0 : this.numUnusableFreeCells(numCellsWanted) / this.#numFreeCells;
  }

  /** The free ranges, sorted by start. */
  freeRanges(): Slab[] {
    return this.#free.map((r) => ({ start: r.start, numCells: r.numCells }));
  }

  checkInvariants(): void {
    let freeCells = 0;
    for (let i = 0; i < this.#free.length; i++) {
      const r = this.#free[i]!;
      if (r.numCells <= 0) bug(`ContiguousAllocator: empty free range at ${r.start}`);
      const prev = this.#free[i - 1];
      if (prev !== undefined && prev.start + prev.numCells >= r.start) {
        bug(`ContiguousAllocator: free ranges at ${prev.start} and ${r.start} overlap or touch (not coalesced)`);
      }
      freeCells += r.numCells;
    }
    if (freeCells !== this.#numFreeCells) bug('ContiguousAllocator: free-cell counter is off');
    const pieces: [number, number][] = this.#free.map((r) => [r.start, r.numCells]);
    for (const [start, n] of this.#slabs) pieces.push([start, n]);
    pieces.sort((a, b) => a[0] - b[0]);
    let cursor = 0;
    for (const [start, n] of pieces) {
      if (start !== cursor || n <= 0) bug(`ContiguousAllocator: cells do not tile at ${cursor}`);
      cursor += n;
    }
    if (cursor !== this.numCells) bug(`ContiguousAllocator: tiles cover ${cursor} of ${this.numCells} cells`);
  }

  // ---- helpers ----

  /** Index of the first free range that fits `size` cells, or -1. */
  #firstFit(size: number): number {
    if (size <= 0) return -1;
    return this.#free.findIndex((r) => r.numCells >= size);
  }
}
