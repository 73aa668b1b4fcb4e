// What the radix prefix cache stores on each edge of its trie (src/structures/radix-trie.ts), and
// the LRU order its eviction heap keeps.
//
// A non-root node's value holds the `blocks` of its key (one per blockSize tokens, one pool
// reference each) and the llama.cpp sequence (`ownerSeqId`) whose KV cells hold the node's tokens
// and its whole root path, positions [0, startToken + key.length).

import type { SeqId } from '../plan.ts';
import type { TrieNode } from '../../structures/radix-trie.ts';
import type { BlockId } from './block-pool.ts';

export interface CacheEntry {
  blocks: BlockId[];
  /** Null only for the root. */
  ownerSeqId: SeqId | null;
  /** Pins (match or insert handles) on this node or below it. Never evicted while > 0. */
  lockRef: number;
  /** Logical-clock time of the last match or insert through this node. */
  lastAccess: number;
}

export type RadixNode = TrieNode<CacheEntry>;

/** An edge split after `numBlocks` blocks: both halves keep the owner (it holds the whole path), the pins and the recency. */
export function splitCacheEntry(e: CacheEntry, numBlocks: number): readonly [CacheEntry, CacheEntry] {
  return [
    { blocks: e.blocks.slice(0, numBlocks), ownerSeqId: e.ownerSeqId, lockRef: e.lockRef, lastAccess: e.lastAccess },
    { blocks: e.blocks.slice(numBlocks), ownerSeqId: e.ownerSeqId, lockRef: e.lockRef, lastAccess: e.lastAccess },
  ];
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
