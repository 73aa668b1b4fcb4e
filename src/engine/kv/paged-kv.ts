// Paged KV: per-sequence block tables over a shared BlockPool.
//
// Invariants:
// - every table satisfies blocks.length === numBlocksNeeded(numTokens) (see block-table.ts);
// - a table holds exactly one pool reference per entry of `blocks`;
// - copy-on-write comes before any append that writes into a shared block: when the last block is
//   partially filled and its refcount is > 1, the writer gets a private copy (refcount 1) and its
//   reference to the shared one is dropped. `canAppend` counts that extra block (the reference
//   system found the missing count with a property test).
//
// Complexity: canAppend, replaceBlock O(1); append O(new blocks); sharePrefix, fork, free O(table blocks);
// checkInvariants O(total table blocks).

import type { BlockId, BlockPool } from './block-pool.ts';
import { isLastBlockPartial, numBlocksNeeded, type BlockTable } from './block-table.ts';
import { bug } from '../../util/bug.ts';

export interface PagedKvOptions {
  readonly pool: BlockPool;
}

/** What one `append` did. */
export interface AppendResult {
  /** Blocks newly taken from the pool (the copy-on-write block included). */
  readonly numNewBlocks: number;
  /** The shared block that was replaced by a private copy, or null when none was. */
  readonly copiedOnWrite: { readonly from: BlockId; readonly to: BlockId } | null;
}

interface MutableTable {
  blocks: BlockId[];
  numTokens: number;
}

export class PagedKv {
  readonly pool: BlockPool;
  readonly blockSize: number;
  /** Every table this manager made (to reject foreign ones). */
  #known = new WeakSet<BlockTable>();
  /** Tables currently holding blocks (for the leak check). */
  #live = new Set<MutableTable>();

  constructor(options: PagedKvOptions) {
    if (typeof options.pool?.allocate !== 'function') {
      throw new TypeError(`PagedKv: expected options.pool to be a BlockPool, got ${typeof options.pool}`);
    }
    this.pool = options.pool;
    this.blockSize = options.pool.blockSize;
  }

  // ---- public API ----

  /** A new, empty table. */
  createTable(): BlockTable {
    const table: MutableTable = { blocks: [], numTokens: 0 };
    this.#known.add(table);
    return table;
  }

  /** Number of tables holding blocks. */
  get numLiveTables(): number {
    return this.#live.size;
  }

  /** Blocks `append(table, numNewTokens)` would take from the pool, copy-on-write included. */
  numBlocksToAppend(table: BlockTable, numNewTokens: number): number {
    const t = this.#own(table);
    if (!Number.isSafeInteger(numNewTokens) || numNewTokens < 0) {
      bug(`PagedKv: numNewTokens must be a non-negative integer, got ${numNewTokens}`);
    }
    const grow = numBlocksNeeded(t.numTokens + numNewTokens, this.blockSize) - t.blocks.length;
    return grow + (this.#needsCopyOnWrite(t, numNewTokens) ? 1 : 0);
  }

  canAppend(table: BlockTable, numNewTokens: number): boolean {
    return this.pool.canAllocate(this.numBlocksToAppend(table, numNewTokens));
  }

  /** Makes room for `numNewTokens` more tokens. Call only when `canAppend`. */
  append(table: BlockTable, numNewTokens: number): AppendResult {
    const t = this.#own(table);
    const numNewBlocks = this.numBlocksToAppend(t, numNewTokens);
    if (!this.pool.canAllocate(numNewBlocks)) {
      bug(`PagedKv.append needs ${numNewBlocks} blocks, ${this.pool.numFree} free (check canAppend first)`);
    }
    let copiedOnWrite: AppendResult['copiedOnWrite'] = null;
    if (this.#needsCopyOnWrite(t, numNewTokens)) {
      const from = t.blocks[t.blocks.length - 1]!;
      const to = this.pool.copyOnWrite(from);
      t.blocks[t.blocks.length - 1] = to;
      copiedOnWrite = { from, to };
    }
    const grow = numBlocksNeeded(t.numTokens + numNewTokens, this.blockSize) - t.blocks.length;
    for (const id of this.pool.allocate(grow)) t.blocks.push(id);
    t.numTokens += numNewTokens;
    if (t.blocks.length > 0) this.#live.add(t);
    return { numNewBlocks, copiedOnWrite };
  }

  /**
   * Starts an empty table from a cached prefix: takes one reference on each block.
   * `numTokens` must fill exactly `blocks` (the last one possibly partially).
   */
  sharePrefix(table: BlockTable, blocks: readonly BlockId[], numTokens: number): void {
    const t = this.#own(table);
    if (t.blocks.length !== 0) bug('PagedKv.sharePrefix on a non-empty table');
    if (numBlocksNeeded(numTokens, this.blockSize) !== blocks.length) {
      bug(`PagedKv.sharePrefix: ${numTokens} tokens do not fill ${blocks.length} blocks of ${this.blockSize}`);
    }
    for (const id of blocks) this.pool.incRef(id);
    t.blocks = blocks.slice();
    t.numTokens = numTokens;
    if (t.blocks.length > 0) this.#live.add(t);
  }

  /**
   * Points entry `index` of the table at `block` instead (a full block holding the same tokens'
   * KV, shared with whoever holds it): takes a reference on it and drops the one on the old block.
   */
  replaceBlock(table: BlockTable, index: number, block: BlockId): void {
    const t = this.#own(table);
    if (!Number.isInteger(index) || index < 0 || (index + 1) * this.blockSize > t.numTokens) bug(`PagedKv.replaceBlock: entry ${index} is not a full block of a ${t.numTokens}-token table`);
    const old = t.blocks[index]!;
    if (old === block) return;
    this.pool.incRef(block);
    t.blocks[index] = block;
    this.pool.decRef(old);
  }

  /** A new table sharing every block of `table` (a forked sequence); appending to either copies on write. */
  fork(table: BlockTable): BlockTable {
    const t = this.#own(table);
    const copy = this.createTable();
    this.sharePrefix(copy, t.blocks, t.numTokens);
    return copy;
  }

  /**
   * Drops the table's references, last block first, so the table's first block ends on top of the
   * free stack: a table of the same size allocated next gets the same ids in the same order.
   * The table is left empty and can be reused.
   */
  free(table: BlockTable): void {
    const t = this.#own(table);
    for (let i = t.blocks.length - 1; i >= 0; i--) this.pool.decRef(t.blocks[i]!);
    t.blocks = [];
    t.numTokens = 0;
    this.#live.delete(t);
  }

  /** Adds every live table's references to `into` (for BlockPool.checkInvariants). */
  countBlockRefs(into: Map<BlockId, number>): void {
    for (const t of this.#live) for (const id of t.blocks) into.set(id, (into.get(id) ?? 0) + 1);
  }

  /** Each table's shape, and that each of its blocks is allocated. */
  checkInvariants(): void {
    for (const t of this.#live) {
      if (t.blocks.length !== numBlocksNeeded(t.numTokens, this.blockSize) || t.blocks.length === 0) {
        bug(`PagedKv: table of ${t.numTokens} tokens holds ${t.blocks.length} blocks`);
      }
      for (const id of t.blocks) {
        if (this.pool.refCount(id) === 0) bug(`PagedKv: table holds free block ${id}`);
      }
    }
  }

  // ---- helpers ----

  #needsCopyOnWrite(t: BlockTable, numNewTokens: number): boolean {
    if (numNewTokens === 0 || !isLastBlockPartial(t.numTokens, this.blockSize)) return false;
    return this.pool.refCount(t.blocks[t.blocks.length - 1]!) > 1;
  }

  #own(table: BlockTable): MutableTable {
    if (!this.#known.has(table)) bug('PagedKv: table was not created by this PagedKv');
    return table as MutableTable;
  }
}
