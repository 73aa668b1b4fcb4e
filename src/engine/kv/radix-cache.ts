// The radix prefix cache (SGLang style) over token ids, matching only at block boundaries: the
// block and owner-sequence layer over the value-agnostic RadixTrie (src/structures/radix-trie.ts),
// which owns the tree's shape; this file owns what its values mean, pins, LRU and eviction.
//
//   root ─ [sys prompt: 4 blocks, owner 3] ─┬─ [user A: 2 blocks, owner 3]
//                                            └─ [user B: 1 block,  owner 7]
//
// Invariants (checked by `checkInvariants()`):
// - Block alignment: the trie's unit is blockSize, so a node's key is whole blocks and edges split
//   only at block boundaries; a node holds one block per blockSize tokens. A partially filled block
//   is never cached.
// - References: the cache holds exactly one pool reference per stored block; a block is stored in
//   at most one node.
// - Owner sequences: a node's `ownerSeqId` holds the KV cells of the node, the very cells its
//   blocks account for. A hit therefore copies each matched node's range from that node's owner
//   (`PrefixMatch.segments`), not the whole path from the deepest owner: an owner's cells for its
//   ancestors' ranges may be its own duplicates (two requests computed the same prefix at once,
//   which paged-kv-manager.ts swaps for the cache's own once it has inserted), and copying those made the accounting reference
//   one set of blocks while the pool held another (found by the scheduler property test once
//   steps carried whole prompts: 3 blocks undercounted, a batch refused). The deepest owner also
//   holds the whole root path's positions, its own or copied. It holds because `insert(tokens, blocks, seqId)`
//   requires `seqId` to hold the cells of every inserted token (it computed them or seqCopied the
//   matched part), new nodes are created below their parent only by such an insert, and a split
//   gives both halves the owner of the node it splits. All nodes one sequence owns lie on one root
//   path (a sequence has one token history), so removing an evicted leaf's range from its owner
//   never touches another node's cells.
// - Pins: `lockRef` counts the handles (from match or insert) on the node or below it; a node with
//   lockRef > 0 is never evicted. evictable/protected block counts are running counters.
// - Sequence ids: an owner stays acquired in the SeqIdPool while it owns a node; when eviction takes
//   its last node, the cache emits `remove(owner, 0, -1)` and releases the id to the SeqIdPool
//   itself (and lists it in `releasedSeqIds`). free + (owners ∪ held by running requests) = total.
//
// The caller's protocol (the scheduler):
// - starting a request: `m = match(prompt)`; decide with m pinned (evicting to make room cannot take the
//   matched path); on start: seqCopy(seg.ownerSeqId → seq, seg.p0, seg.p1) for each of m.segments in the plan and
//   PagedKv.sharePrefix(table, m.blocks, m.numTokens); then `release(m.handle)` either way.
// - prefill complete (and later, optionally): `r = insert(computedTokens, table.blocks, seq)`; keep
//   r.handle while the sequence runs (it pins every node the sequence owns), release the previous one.
// - finish, abort or preempt: release the handle; remove(seq, r.numCachedTokens, -1); free the
//   table; and only if `!ownsNodes(seq)`: remove(seq, 0, -1) and release the seq id. Otherwise the
//   cache now holds that id and gives it back on eviction.
// - every `kvOps` list returned goes into the plan in order, before ops on ids acquired later.
//
// Complexity (L = query tokens, d = path depth in nodes, k = nodes evicted, h = heap entries):
// match O(L + d), plus at most one split O(node key); peek O(L + d); insert O(L + d); release O(d);
// evict O(k log h) amortized — evictable leaves sit in a lazily-cleaned min-heap (the shared
// BinaryHeap) on (lastAccess, id), rebuilt in O(nodes) when stale entries outnumber live ones;
// checkInvariants O(nodes · d + blocks).

import type { KvOp, SeqId } from '../plan.ts';
import type { BlockId, BlockPool } from './block-pool.ts';
import { numFullBlocks } from './block-table.ts';
import { BinaryHeap } from '../../structures/binary-heap.ts';
import { RadixTrie } from '../../structures/radix-trie.ts';
import { checkRadixInvariants } from './radix-invariants.ts';
import { lruLess, splitCacheEntry, type CacheEntry, type LruEntry, type RadixNode } from './radix-node.ts';
import type { SeqIdPool } from './seq-id-pool.ts';
import { bug } from '../../util/bug.ts';

/** A pin on a path of the cache; release exactly once. */
export type CacheHandle = number & { readonly __brand: 'CacheHandle' };

export interface RadixCacheOptions {
  /** The pool the cached blocks come from; its blockSize is the matching granularity. */
  readonly pool: BlockPool;
  /** Where owner sequence ids return when their last node is evicted. */
  readonly seqIdPool: SeqIdPool;
}

/** The longest cached block-aligned prefix of a query. */
export interface PrefixMatch {
  /** Tokens matched, a multiple of blockSize (0 on a miss). */
  readonly numTokens: number;
  /** The blocks holding them, in order (numTokens / blockSize of them). */
  readonly blocks: readonly BlockId[];
  /**
   * The seqCopy ops that give a sequence exactly these blocks' cells: per run of matched nodes with
   * one owner, [p0, p1) from that owner, in order (empty on a miss).
   */
  readonly segments: readonly { readonly ownerSeqId: SeqId; readonly p0: number; readonly p1: number }[];
  /** Pins the matched path until `release(handle)`. */
  readonly handle: CacheHandle;
}

export interface InsertResult {
  /** Tokens of this sequence now in the cache (its whole-block prefix). */
  readonly numCachedTokens: number;
  /** Tokens of them stored by new nodes, adopting the caller's blocks. */
  readonly numNewTokens: number;
  /** True when `seqId` owns a node: the caller must not release the id when the sequence ends. */
  readonly ownsNodes: boolean;
  /** Pins the inserted path (every node `seqId` owns) until `release(handle)`. */
  readonly handle: CacheHandle;
}

export interface EvictResult {
  /** Blocks that went back to the pool (a block shared with a running table does not). */
  readonly numBlocksFreed: number;
  readonly numNodesEvicted: number;
  /** Per evicted node remove(owner, start, end); remove(owner, 0, -1) when an owner lost its last node. In order. */
  readonly kvOps: readonly KvOp[];
  /** Owners that own nothing any more; already released to the SeqIdPool. */
  readonly releasedSeqIds: readonly SeqId[];
}

export class RadixCache {
  readonly blockSize: number;
  #pool: BlockPool;
  #seqIdPool: SeqIdPool;
  #trie: RadixTrie<CacheEntry>;
  #clock = 0;
  #heap = new BinaryHeap<LruEntry>(lruLess);
  #handles = new Map<CacheHandle, RadixNode>();
  #nextHandle = 1;
  /** owner → number of nodes it owns. */
  #ownedNodes = new Map<SeqId, number>();
  /** 1 where a block is stored in some node (the cheap check behind "at most one node"). */
  #cached: Uint8Array;
  #numEvictableBlocks = 0;
  #numProtectedBlocks = 0;
  #numQueryTokens = 0;
  #numHitTokens = 0;
  #numEdgeSplits = 0;
  #numEvictedNodes = 0;
  #numEvictedBlocks = 0;

  constructor(options: RadixCacheOptions) {
    if (typeof options.pool?.decRef !== 'function') throw new TypeError(`RadixCache: expected options.pool to be a BlockPool, got ${typeof options.pool}`);
    if (typeof options.seqIdPool?.release !== 'function') {
      throw new TypeError(`RadixCache: expected options.seqIdPool to be a SeqIdPool, got ${typeof options.seqIdPool}`);
    }
    this.#pool = options.pool;
    this.#seqIdPool = options.seqIdPool;
    this.blockSize = options.pool.blockSize;
    this.#cached = new Uint8Array(options.pool.numBlocks);
    this.#trie = new RadixTrie<CacheEntry>({ unit: this.blockSize, rootValue: { blocks: [], ownerSeqId: null, lockRef: 0, lastAccess: 0 }, splitValue: splitCacheEntry });
  }

  // ---- public API ----

  /**
   * Longest cached prefix of `tokens` at a block boundary, pinned until `release(handle)`; touches
   * the path (LRU). A node the query leaves part way is split there (as SGLang does), so the pin
   * holds only the matched blocks: pinning the whole node once let a one-block hit on a 480-block
   * node protect all 480, and the request that needed them waited forever (found by
   * bench/kv/mixed-overload.sh: the engine slept with eight requests waiting and none running).
   * A caller that needs logits for the last prompt token passes the prompt without it.
   * Statistics count every call unless `recordStats: false`: the cache cannot tell a retry from a
   * new request, so the caller must pass it on head-of-line retries and restarts after preemption
   * (PagedKvManager counts one lookup per request). Use `peek` to ask without any side effect.
   */
  match(tokens: readonly number[], options: { readonly recordStats?: boolean } = {}): PrefixMatch {
    const w = this.#trie.walk(tokens);
    const blocks: BlockId[] = [];
    const segments: { ownerSeqId: SeqId; p0: number; p1: number }[] = [];
    for (const [i, n] of w.path.entries()) {
      const k = i === w.path.length - 1 ? w.numUnitsInLast : n.value.blocks.length;
      for (let j = 0; j < k; j++) blocks.push(n.value.blocks[j]!);
      const owner = n.value.ownerSeqId!;
      const p0 = n.startToken;
      const p1 = p0 + k * this.blockSize;
      const last = segments.at(-1);
      if (last !== undefined && last.ownerSeqId === owner && last.p1 === p0) last.p1 = p1;
      else if (p1 > p0) segments.push({ ownerSeqId: owner, p0, p1 });
    }
    let deepest = w.path.at(-1) ?? this.#trie.root;
    // Split where the query leaves the node, so the pin covers exactly the matched blocks.
    if (deepest !== this.#trie.root && w.numUnitsInLast < deepest.value.blocks.length) deepest = this.#split(deepest, w.numUnitsInLast);
    this.#touch(deepest);
    if (options.recordStats !== false) {
      this.#numQueryTokens += tokens.length;
      this.#numHitTokens += w.numTokens;
    }
    return { numTokens: w.numTokens, blocks, segments, handle: this.#pin(deepest) };
  }

  /**
   * Tokens of `tokens` the cache holds now (the block-aligned prefix `match` would return), with no
   * side effect: no LRU touch, no pin, no statistics. For "how much of this prompt is cached"
   * (admission control). The answer can go stale at the next eviction. O(L + d).
   */
  peek(tokens: readonly number[]): number {
    return this.#trie.walk(tokens).numTokens;
  }

  /** Unpins what `match` or `insert` pinned. */
  release(handle: CacheHandle): void {
    const node = this.#handles.get(handle);
    if (node === undefined) bug(`RadixCache.release(${handle}): unknown or already released handle`);
    this.#handles.delete(handle);
    this.#decLockRef(node);
  }

  /**
   * Caches the whole-block prefix of `tokens`, whose KV `seqId` holds and whose blocks are
   * `blocks` (the sequence's table). Existing nodes stay as they are (the caller's duplicate blocks
   * are not adopted); new nodes take a reference on the caller's blocks and are owned by `seqId`.
   */
  insert(tokens: readonly number[], blocks: readonly BlockId[], seqId: SeqId): InsertResult {
    const bs = this.blockSize;
    const numBlocks = numFullBlocks(tokens.length, bs);
    if (blocks.length < numBlocks) bug(`RadixCache.insert: ${tokens.length} tokens but only ${blocks.length} blocks`);
    if (!this.#seqIdPool.isAcquired(seqId)) bug(`RadixCache.insert by sequence ${seqId}, which is not acquired`);
    const w = this.#trie.walk(tokens);
    let node = w.path.at(-1) ?? this.#trie.root;
    if (node !== this.#trie.root && w.numUnitsInLast < node.value.blocks.length) node = this.#split(node, w.numUnitsInLast);
    let numNewTokens = 0;
    if (w.numTokens < numBlocks * bs) {
      node = this.#addLeaf(node, tokens.slice(w.numTokens, numBlocks * bs), blocks.slice(w.numTokens / bs, numBlocks), seqId);
      numNewTokens = numBlocks * bs - w.numTokens;
    }
    this.#touch(node);
    return { numCachedTokens: numBlocks * bs, numNewTokens, ownsNodes: this.ownsNodes(seqId), handle: this.#pin(node) };
  }

  /**
   * Evicts unpinned leaves, least recently used first, until `numBlocks` blocks went back to the
   * pool or nothing is evictable. A parent whose last child goes becomes a candidate itself.
   */
  evict(numBlocks: number): EvictResult {
    const kvOps: KvOp[] = [];
    const releasedSeqIds: SeqId[] = [];
    let numBlocksFreed = 0;
    let numNodesEvicted = 0;
    if (this.#heap.size > 2 * this.#trie.numNodes + 64) this.#rebuildHeap();
    while (numBlocksFreed < numBlocks) {
      const entry = this.#heap.pop();
      if (entry === undefined) break;
      const node = entry.node;
      if (!this.#isEvictable(node) || entry.stamp !== node.value.lastAccess) continue;
      const v = node.value;
      // Last block first, as PagedKv.free does: the node's first block ends on top of the free stack.
      for (let i = v.blocks.length - 1; i >= 0; i--) {
        const id = v.blocks[i]!;
        this.#cached[id] = 0;
        if (this.#pool.decRef(id)) numBlocksFreed++;
      }
      const owner = v.ownerSeqId!;
      kvOps.push({ kind: 'remove', seqId: owner, p0: node.startToken, p1: node.startToken + node.key.length });
      const parent = this.#trie.removeLeaf(node);
      this.#numEvictableBlocks -= v.blocks.length;
      numNodesEvicted++;
      const left = this.#ownedNodes.get(owner)! - 1;
      if (left > 0) {
        this.#ownedNodes.set(owner, left);
      } else {
        this.#ownedNodes.delete(owner);
        kvOps.push({ kind: 'remove', seqId: owner, p0: 0, p1: -1 });
        this.#seqIdPool.release(owner);
        releasedSeqIds.push(owner);
      }
      this.#queueIfEvictable(parent);
    }
    this.#numEvictedNodes += numNodesEvicted;
    this.#numEvictedBlocks += numBlocksFreed;
    return { numBlocksFreed, numNodesEvicted, kvOps, releasedSeqIds };
  }

  ownsNodes(seqId: SeqId): boolean {
    return this.#ownedNodes.has(seqId);
  }

  /** Sequence ids the cache holds as owners. */
  ownerSeqIds(): SeqId[] {
    return [...this.#ownedNodes.keys()];
  }

  /** Adds the cache's block references (one per stored block) to `into`, for BlockPool.checkInvariants. */
  countBlockRefs(into: Map<BlockId, number>): void {
    for (const n of this.#trie.nodes()) for (const id of n.value.blocks) into.set(id, (into.get(id) ?? 0) + 1);
  }

  get numNodes(): number { return this.#trie.numNodes; }
  /** Blocks in unpinned nodes (some may still be shared with running tables). */
  get numEvictableBlocks(): number { return this.#numEvictableBlocks; }
  /** Blocks in pinned nodes. */
  get numProtectedBlocks(): number { return this.#numProtectedBlocks; }
  /** Outstanding handles (pins not yet released). */
  get numHandles(): number { return this.#handles.size; }
  get numQueryTokens(): number { return this.#numQueryTokens; }
  get numHitTokens(): number { return this.#numHitTokens; }
  /** Token-level hit rate: hit tokens / query tokens (0 before any query). */
  get hitRate(): number { return this.#numQueryTokens === 0 ? 0 : this.#numHitTokens / this.#numQueryTokens; }
  get numEdgeSplits(): number { return this.#numEdgeSplits; }
  get numEvictedNodes(): number { return this.#numEvictedNodes; }
  /** Blocks eviction returned to the pool. */
  get numEvictedBlocks(): number { return this.#numEvictedBlocks; }

  /**
   * Full check (see the header). `externallyHeldSeqIds`: the ids running requests hold
   * (an id may be both running and an owner).
   */
  checkInvariants(externallyHeldSeqIds: Iterable<SeqId>): void {
    this.#trie.checkInvariants();
    checkRadixInvariants({
      trie: this.#trie,
      blockSize: this.blockSize,
      pool: this.#pool,
      seqIdPool: this.#seqIdPool,
      handles: this.#handles,
      ownedNodes: this.#ownedNodes,
      cached: this.#cached,
      heapEntries: this.#heap.items(),
      clock: this.#clock,
      numEvictableBlocks: this.#numEvictableBlocks,
      numProtectedBlocks: this.#numProtectedBlocks,
      externallyHeldSeqIds: new Set(externallyHeldSeqIds),
    });
  }

  // ---- helpers ----

  #addLeaf(parent: RadixNode, key: number[], blocks: BlockId[], owner: SeqId): RadixNode {
    for (const id of blocks) {
      if (this.#cached[id] === 1) bug(`RadixCache.insert: block ${id} is already cached in another node`);
      this.#pool.incRef(id);
      this.#cached[id] = 1;
    }
    const node = this.#trie.addLeaf(parent, key, { blocks, ownerSeqId: owner, lockRef: 0, lastAccess: this.#clock });
    this.#ownedNodes.set(owner, (this.#ownedNodes.get(owner) ?? 0) + 1);
    this.#numEvictableBlocks += blocks.length;
    return node;
  }

  /** Splits `node` after its first `numBlocks` blocks; returns the new head. `node` stays the tail, so its handles stay valid. */
  #split(node: RadixNode, numBlocks: number): RadixNode {
    const head = this.#trie.split(node, numBlocks);
    const owner = head.value.ownerSeqId!;
    this.#ownedNodes.set(owner, this.#ownedNodes.get(owner)! + 1);
    this.#numEdgeSplits++;
    return head;
  }

  #touch(node: RadixNode): void {
    this.#clock++;
    for (let n: RadixNode | null = node; n !== null; n = n.parent) n.value.lastAccess = this.#clock;
    this.#queueIfEvictable(node); // only the deepest node can be a leaf; a no-op when it is pinned next
  }

  #pin(node: RadixNode): CacheHandle {
    for (let n: RadixNode = node; n !== this.#trie.root; n = n.parent!) {
      if (n.value.lockRef === 0) {
        this.#numEvictableBlocks -= n.value.blocks.length;
        this.#numProtectedBlocks += n.value.blocks.length;
      }
      n.value.lockRef++;
    }
    const handle = this.#nextHandle++ as CacheHandle;
    this.#handles.set(handle, node);
    return handle;
  }

  #decLockRef(node: RadixNode): void {
    for (let n: RadixNode = node; n !== this.#trie.root; n = n.parent!) {
      if (n.value.lockRef <= 0) bug(`RadixCache: lockRef of node ${n.id} would go negative`);
      n.value.lockRef--;
      if (n.value.lockRef === 0) {
        this.#numEvictableBlocks += n.value.blocks.length;
        this.#numProtectedBlocks -= n.value.blocks.length;
        this.#queueIfEvictable(n);
      }
    }
  }

  #isEvictable(node: RadixNode): boolean {
    return node.alive && node !== this.#trie.root && node.value.lockRef === 0 && node.children.size === 0;
  }

  #queueIfEvictable(node: RadixNode): void {
    if (this.#isEvictable(node)) this.#heap.push({ stamp: node.value.lastAccess, node });
  }

  #rebuildHeap(): void {
    this.#heap.clear();
    for (const n of this.#trie.nodes()) this.#queueIfEvictable(n);
  }
}
