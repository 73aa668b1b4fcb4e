// A node of the radix prefix cache, and the block-key helpers the cache and its checks share.
//
// A non-root node stores `key`: a run of tokens whose length is a positive multiple of blockSize,
// the `blocks` holding them (one per blockSize tokens, one pool reference each), and the llama.cpp
// sequence (`ownerSeqId`) whose KV cells hold the node's tokens and its whole root path,
// positions [0, startToken + key.length). Children are keyed by their first block of tokens.

import type { SeqId } from '../runner/runner.ts';
import type { BlockId } from './block-pool.ts';

export interface RadixNode {
  /** Unique per cache, increasing in creation order (the LRU tie-breaker). */
  readonly id: number;
  parent: RadixNode | null;
  readonly children: Map<string, RadixNode>;
  key: number[];
  blocks: BlockId[];
  /** Tokens on the path above this node: the node covers positions [startToken, startToken + key.length). */
  startToken: number;
  /** Null only for the root. */
  ownerSeqId: SeqId | null;
  /** Pins (match or insert handles) on this node or below it. Never evicted while > 0. */
  lockRef: number;
  /** Logical-clock time of the last match or insert through this node. */
  lastAccess: number;
  /** False once evicted. */
  alive: boolean;
}

/** An entry of the eviction heap: a node and its last access when the entry was pushed (stale once they differ). */
export interface LruEntry {
  /** Logical-clock time of the node's last access when the entry was pushed. */
  readonly stamp: number;
  readonly node: RadixNode;
}

/** Eviction order: least recently used first, then oldest node (ids grow in creation order): total and deterministic. */
export function lruLess(x: LruEntry, y: LruEntry): boolean {
  return x.stamp < y.stamp || (x.stamp === y.stamp && x.node.id < y.node.id);
}

/** The child key of the block of `tokens` starting at `start`. */
export function blockKey(tokens: readonly number[], start: number, blockSize: number): string {
  let s = '';
  for (let i = start; i < start + blockSize; i++) s += `${tokens[i]},`;
  return s;
}

/**
 * Whole blocks of `node.key` equal to `tokens` from `start` on, at most `maxBlocks`. The first block
 * is known to match (it is the child key), so the comparison starts at the second.
 */
export function numMatchingBlocks(node: RadixNode, tokens: readonly number[], start: number, blockSize: number, maxBlocks: number): number {
  const limit = Math.min(node.blocks.length, maxBlocks);
  let m = 1;
  for (; m < limit; m++) {
    const off = m * blockSize;
    for (let i = 0; i < blockSize; i++) {
      if (node.key[off + i] !== tokens[start + off + i]) return m;
    }
  }
  return m;
}

export function isLeaf(node: RadixNode): boolean {
  return node.children.size === 0;
}
