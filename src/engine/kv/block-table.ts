// A sequence's block table and the block arithmetic, in one place.
//
// A table is a read-only view for everyone but `PagedKv`, which creates and mutates tables.
// Invariant: blocks.length === numBlocksNeeded(numTokens, blockSize); tokens fill the blocks in
// order, so only the last block can be partially filled:
//
//   numTokens = 37, blockSize = 16:   [ b0: 16 ][ b1: 16 ][ b2: 5 of 16 ]
//
// All functions here are O(1).

import type { BlockId } from './block-pool.ts';

/** One sequence's KV blocks. Mutated only by `PagedKv`. */
export interface BlockTable {
  /** Blocks holding the sequence's tokens, in position order. */
  readonly blocks: readonly BlockId[];
  /** Tokens stored; positions [0, numTokens). */
  readonly numTokens: number;
}

/** Blocks needed to hold `numTokens` tokens. */
export function numBlocksNeeded(numTokens: number, blockSize: number): number {
  return Math.ceil(numTokens / blockSize);
}

/** Whole blocks in `numTokens` tokens (the part a prefix cache can share). */
export function numFullBlocks(numTokens: number, blockSize: number): number {
  return Math.floor(numTokens / blockSize);
}

/** `numTokens` rounded down to a block boundary. */
export function blockAlignedTokens(numTokens: number, blockSize: number): number {
  return numFullBlocks(numTokens, blockSize) * blockSize;
}

/** True when the last block holding `numTokens` tokens has free room (so appending writes into it). */
export function isLastBlockPartial(numTokens: number, blockSize: number): boolean {
  return numTokens % blockSize !== 0;
}
