// KvManager over the paged block pool and the radix prefix cache (or no cache).
//
// The block pool is the accounting model of llama.cpp's unified pool: `numCells / blockSize`
// blocks, a sequence of n tokens holding ceil(n / blockSize) of them, a block shared through the
// cache counted once (seq_cp tags cells, it does not copy them). Accounting ≥ cells really used,
// so a batch the accounting accepted always fits (the mock runner's exact cell model checks this).
//
// Allocation (see kv-manager.ts): a request's table is sized for its whole prompt at start, so a
// prompt never stops half way for want of blocks; while others run, `watermark` blocks stay free
// for their decode growth. The check looks at free + evictable blocks before evicting anything, so
// a request that cannot fit does not flush the cache for nothing.
//
// Duplicate prefixes: two requests with the same prefix started before either finished its
// prefill both compute that prefix. The cache keeps the first one's blocks; when the second
// offers its prompt, its duplicate blocks are swapped for the cache's (an `adopt` op: its own cells
// freed, the owner's shared), so no sequence ever holds cells the accounting does not count.
//
// Prefix-cache statistics count one lookup per request: its first allocation attempt. Head-of-line
// retries and re-starts after preemption match with `recordStats: false`.
//
// Complexity: allocate O(prompt + path depth + evicted nodes); grow O(new blocks + evicted);
// release O(table + path depth); numReservedBlocks and snapshot O(running).

import type { KvOp, SeqId } from '../plan.ts';
import { BlockPool } from '../kv/block-pool.ts';
import type { BlockId } from '../kv/block-pool.ts';
import type { BlockTable } from '../kv/block-table.ts';
import { numBlocksNeeded } from '../kv/block-table.ts';
import { PagedKv } from '../kv/paged-kv.ts';
import type { CacheHandle, EvictResult } from '../kv/radix-cache.ts';
import { RadixCache } from '../kv/radix-cache.ts';
import { SeqIdPool } from '../kv/seq-id-pool.ts';
import { PrefixDoorkeeper } from '../kv/doorkeeper.ts';
import { HostTier } from '../kv/host-tier.ts';
import type { HostMatch } from '../kv/host-tier.ts';
import type { Request } from '../request.ts';
import type { AllocateResult, KvManager, KvManagerOptions } from './kv-manager.ts';
import type { KvSnapshot } from './scheduler.ts';
import { bug } from '../../util/bug.ts';

export const DEFAULT_WATERMARK_FRACTION = 0.01;
/** The host tier keeps sequences of at least this many blocks, and is used over the pool's cache only when it holds this many more. */
const HOST_MIN_BLOCKS = 4;

interface SeqState {
  readonly seqId: SeqId;
  readonly table: BlockTable;
  /** Pin on the cache path this sequence inserted (held while it runs). */
  handle: CacheHandle | null;
  /** Tokens of this sequence now stored in the cache (0 before its insert). */
  numCachedTokens: number;
  /** Its prompt has been offered to the cache (inserted, or not retained by the doorkeeper). */
  offered: boolean;
  /**
   * Its prefix was placed back from the host tier. Such a sequence is not inserted into the pool's
   * cache: its prefix cells duplicate whatever shorter match the cache has, and pinning that path
   * while holding the duplicates could leave it no room to grow. It goes back to host memory instead.
   */
  readonly fromHost: boolean;
}

export class PagedKvManager implements KvManager {
  readonly #opts: KvManagerOptions;
  readonly #seqIds: SeqIdPool;
  readonly #pool: BlockPool;
  readonly #paged: PagedKv;
  readonly #radix: RadixCache | null;
  /** Most of the pool idle cached prefixes may keep (the option, resolved). */
  readonly #cacheMaxFraction: number;
  /** 'seen' retention: which prompt prefixes an earlier request had (null: retain every prompt). */
  readonly #doorkeeper: PrefixDoorkeeper | null;
  /** Sequences saved to host memory when they leave the pool (null: off). */
  readonly #host: HostTier | null;
  /** Prompt tokens the host tier found beyond what the pool's cache matched (first lookups only). */
  #hostExtraHitTokens = 0;
  /** Duplicate blocks swapped for the cache's own after an insert (#adoptCachedCopies). */
  #numAdoptedBlocks = 0;
  /** Blocks a new request must leave free while others run. */
  readonly #watermark: number;
  readonly #states = new Map<Request, SeqState>();
  /** Requests whose prefix lookup has been counted in the cache statistics. */
  readonly #lookedUp = new WeakSet<Request>();
  #kvOps: KvOp[] = [];

  constructor(opts: KvManagerOptions) {
    if (opts.mode !== 'paged') throw new Error(`PagedKvManager: expected mode 'paged', got '${opts.mode}'`);
    if (opts.cacheMaxFraction !== undefined && !(opts.cacheMaxFraction >= 0 && opts.cacheMaxFraction <= 1)) throw new Error(`KvManager: expected cacheMaxFraction in [0, 1], got ${opts.cacheMaxFraction}`);
    const wm = opts.watermarkFraction ?? DEFAULT_WATERMARK_FRACTION;
    if (!(wm >= 0 && wm <= 0.5)) throw new Error(`KvManager: expected watermarkFraction in [0, 0.5], got ${opts.watermarkFraction}`);
    if (!(opts.numCells >= opts.blockSize)) throw new Error(`KvManager: expected numCells ≥ blockSize, got ${opts.numCells} < ${opts.blockSize}`);
    this.#opts = opts;
    this.#seqIds = new SeqIdPool({ maxSequences: opts.maxSequences });
    this.#pool = new BlockPool({ numBlocks: Math.floor(opts.numCells / opts.blockSize), blockSize: opts.blockSize });
    this.#paged = new PagedKv({ pool: this.#pool });
    this.#radix = opts.prefixCache ? new RadixCache({ pool: this.#pool, seqIdPool: this.#seqIds }) : null;
    const hostTokens = opts.hostTierTokens ?? 0;
    if (!(Number.isInteger(hostTokens) && hostTokens >= 0)) throw new Error(`KvManager: expected hostTierTokens to be an integer ≥ 0, got ${opts.hostTierTokens}`);
    const host = opts.prefixCache && hostTokens > 0;
    // With the host tier an idle prefix waits in host memory by default, not in the pool, where it
    // would widen the range every row attends over (see KvManagerOptions.cacheMaxFraction).
    this.#cacheMaxFraction = opts.cacheMaxFraction ?? (host ? 0 : 1);
    // The doorkeeper only decides what stays once its request is gone; with nothing idle kept it
    // would only stop a first occurrence being shared with the requests that run beside it.
    this.#doorkeeper = opts.prefixCache && this.#cacheMaxFraction > 0 && (opts.cacheRetain ?? 'seen') === 'seen' ? new PrefixDoorkeeper(opts.blockSize) : null;
    this.#watermark = Math.ceil(wm * this.#pool.numBlocks);
    this.#host = host ? new HostTier({ blockSize: opts.blockSize, capacityTokens: hostTokens, minTokens: HOST_MIN_BLOCKS * opts.blockSize }) : null;
  }

  get numFreeSeqIds(): number {
    return this.#seqIds.numFree;
  }

  get numFreeBlocks(): number {
    return this.#pool.numFree;
  }

  takeKvOps(): KvOp[] {
    const ops = this.#kvOps;
    this.#kvOps = [];
    return ops;
  }

  allocate(req: Request, maxNewTokens: number): AllocateResult {
    if (this.#states.has(req)) bug(`request ${req.id} allocated twice`);
    const pool = this.#pool;
    const numBlocksAll = numBlocksNeeded(req.numTokens, pool.blockSize);
    if (numBlocksAll > pool.numBlocks) return { ok: false, reason: 'never_fits' };
    if (!this.#seqIds.canAcquire()) this.#evictForSeqId();
    if (!this.#seqIds.canAcquire()) return { ok: false, reason: 'no_seq_id' };

    const recordStats = !this.#lookedUp.has(req);
    this.#lookedUp.add(req);
    // The last token is always computed: its logits give the first sample.
    const lookup = req.tokensIn(0, req.numTokens - 1);
    let match = this.#radix?.match(lookup, { recordStats }) ?? null;
    try {
      const inPool = match?.numTokens ?? 0;
      const host = this.#hostMatch(lookup, inPool, numBlocksAll);
      if (host !== null && match !== null) {
        // The pool's shorter match goes unused: unpinned, its blocks may be evicted for this request.
        this.#radix!.release(match.handle);
        match = null;
      }
      const numCached = host?.numTokens ?? match?.numTokens ?? 0;
      // Placed back from host memory, the prefix takes blocks of its own (nothing is shared), and
      // while the load runs all the entry's cells are in place before its tail is removed.
      const need = host !== null ? Math.max(numBlocksAll, numBlocksNeeded(host.numEntryTokens, pool.blockSize)) : numBlocksAll - (match?.blocks.length ?? 0);
      const keepFree = this.#states.size > 0 ? this.#watermark : 0;
      // Cost guard: do not flush the cache for a request that cannot fit anyway (an upper bound:
      // evicting frees unpinned nodes). With nothing running eviction always makes room, so an
      // idle engine never waits on its own cache.
      if (this.#states.size > 0 && pool.numFree + (this.#radix?.numEvictableBlocks ?? 0) < need + keepFree) return { ok: false, reason: 'no_blocks' };
      // The match is pinned: evicting here cannot take the path just matched.
      if (!pool.canAllocate(need + keepFree)) this.#evict(need + keepFree - pool.numFree);
      if (!pool.canAllocate(need + keepFree)) return { ok: false, reason: 'no_blocks' };
      const seqId = this.#seqIds.acquire();
      const table = this.#paged.createTable();
      if (host !== null) {
        this.#kvOps.push({ kind: 'load', seqId, key: host.key });
        if (host.numEntryTokens > host.numTokens) this.#kvOps.push({ kind: 'remove', seqId, p0: host.numTokens, p1: -1 });
        this.#host!.used(host);
        if (recordStats) this.#hostExtraHitTokens += host.numTokens - inPool;
        this.#paged.append(table, req.numTokens);
      } else {
        if (match !== null && numCached > 0) {
          this.#paged.sharePrefix(table, match.blocks, numCached);
          for (const seg of match.segments) this.#kvOps.push({ kind: 'copy', srcSeqId: seg.ownerSeqId, dstSeqId: seqId, p0: seg.p0, p1: seg.p1 });
        }
        this.#paged.append(table, req.numTokens - numCached);
      }
      this.#states.set(req, { seqId, table, handle: null, numCachedTokens: 0, offered: false, fromHost: host !== null });
      return { ok: true, seqId, numCachedTokens: numCached, numNewTokens: Math.min(req.numTokens - numCached, maxNewTokens) };
    } finally {
      if (match !== null) this.#radix!.release(match.handle);
    }
  }

  fork(parent: Request, child: Request, numShared: number): AllocateResult {
    if (this.#states.has(child)) bug(`request ${child.id} allocated twice`);
    const from = this.#state(parent);
    if (!(numShared >= 1 && numShared <= parent.numComputedTokens && numShared < child.numTokens)) {
      bug(`fork of ${parent.id} sharing ${numShared} tokens (${parent.numComputedTokens} computed, child of ${child.numTokens})`);
    }
    if (!this.#seqIds.canAcquire()) this.#evictForSeqId();
    if (!this.#seqIds.canAcquire()) return { ok: false, reason: 'no_seq_id' };
    const pool = this.#pool;
    const shared = from.table.blocks.slice(0, numBlocksNeeded(numShared, pool.blockSize));
    const table = this.#paged.createTable();
    this.#paged.sharePrefix(table, shared, numShared);
    // The rest of the child's prompt, a copy of a shared partial last block included, under the same watermark as a start.
    const need = this.#paged.numBlocksToAppend(table, child.numTokens - numShared);
    if (!pool.canAllocate(need + this.#watermark)) this.#evict(need + this.#watermark - pool.numFree);
    if (!pool.canAllocate(need + this.#watermark)) {
      this.#paged.free(table);
      return { ok: false, reason: 'no_blocks' };
    }
    this.#paged.append(table, child.numTokens - numShared);
    const seqId = this.#seqIds.acquire();
    this.#kvOps.push({ kind: 'copy', srcSeqId: from.seqId, dstSeqId: seqId, p0: 0, p1: numShared });
    this.#states.set(child, { seqId, table, handle: null, numCachedTokens: 0, offered: false, fromHost: false });
    return { ok: true, seqId, numCachedTokens: numShared, numNewTokens: child.numTokens - numShared };
  }

  grow(req: Request, numNewTokens: number): boolean {
    const st = this.#state(req);
    const extra = req.numComputedTokens + numNewTokens - st.table.numTokens;
    if (extra <= 0) return true; // the prompt's room was taken at start
    const need = this.#paged.numBlocksToAppend(st.table, extra);
    if (!this.#pool.canAllocate(need)) this.#evict(need - this.#pool.numFree);
    if (!this.#pool.canAllocate(need)) return false;
    this.#paged.append(st.table, extra);
    return true;
  }

  onComputed(req: Request): void {
    const st = this.#state(req);
    if (this.#radix === null || st.offered || req.numComputedTokens < req.numTokens) return;
    st.offered = true;
    if (st.fromHost) return;
    const tokens = req.tokensIn(0, req.numComputedTokens);
    // 'seen': keep what the cache already had for it and what an earlier prompt also had; the rest
    // of its cells go with the request (see doorkeeper.ts).
    const keep = this.#doorkeeper === null ? tokens.length : Math.max(req.numCachedTokens, this.#doorkeeper.sharedLength(tokens, tokens.length));
    if (keep < this.#pool.blockSize) return;
    const r = this.#radix.insert(keep === tokens.length ? tokens : tokens.slice(0, keep), st.table.blocks, st.seqId);
    st.handle = r.handle;
    st.numCachedTokens = r.numCachedTokens;
    this.#adoptCachedCopies(req, st);
  }

  /**
   * After its insert, blocks of the sequence that duplicate the cache's (another request computed
   * the same prefix at the same time, and its nodes were there first) are swapped for the cache's
   * own, as a hit at start would have given them: its duplicate cells are removed and the owners'
   * copied in. Without this the sequence held both copies while its pin kept the cache's, and a
   * lone request in a small pool could not grow although it would fit alone (found by the
   * scheduler property test, seed 334642). Before this, such blocks outlived the request as
   * "shadow" blocks, held until the cache gave the sequence id back.
   */
  #adoptCachedCopies(req: Request, st: SeqState): void {
    const radix = this.#radix!;
    const bs = this.#pool.blockSize;
    const onPath = radix.match(req.tokensIn(0, st.numCachedTokens), { recordStats: false });
    try {
      for (const seg of onPath.segments) {
        if (seg.ownerSeqId === st.seqId) continue;
        // Runs of blocks in this owner's range that are ours, not the cache's.
        for (let i = seg.p0 / bs; i < seg.p1 / bs; ) {
          if (st.table.blocks[i] === onPath.blocks[i]) {
            i++;
            continue;
          }
          let j = i;
          while (j < seg.p1 / bs && st.table.blocks[j] !== onPath.blocks[j]) j++;
          this.#kvOps.push({ kind: 'adopt', srcSeqId: seg.ownerSeqId, dstSeqId: st.seqId, p0: i * bs, p1: j * bs });
          for (let k = i; k < j; k++) this.#paged.replaceBlock(st.table, k, onPath.blocks[k]!);
          this.#numAdoptedBlocks += j - i;
          i = j;
        }
      }
    } finally {
      radix.release(onPath.handle);
    }
  }

  release(req: Request): void {
    const st = this.#state(req);
    this.#states.delete(req);
    this.#saveToHost(req, st.seqId);
    const radix = this.#radix;
    if (radix !== null && st.handle !== null) {
      this.#checkNoDuplicates(req, st);
      radix.release(st.handle);
    }
    this.#kvOps.push({ kind: 'remove', seqId: st.seqId, p0: st.numCachedTokens, p1: -1 });
    this.#paged.free(st.table);
    if (radix !== null && radix.ownsNodes(st.seqId)) {
      this.#trimCache();
      return; // the cache holds the id now (until eviction gives it back)
    }
    if (st.numCachedTokens > 0) this.#kvOps.push({ kind: 'remove', seqId: st.seqId, p0: 0, p1: -1 });
    this.#seqIds.release(st.seqId);
  }

  /** After #adoptCachedCopies, every block of the sequence on its cache path is the cache's own. */
  #checkNoDuplicates(req: Request, st: SeqState): void {
    const radix = this.#radix!;
    const onPath = radix.match(req.tokensIn(0, st.numCachedTokens), { recordStats: false });
    radix.release(onPath.handle);
    const i = onPath.blocks.findIndex((b, k) => b !== st.table.blocks[k]);
    if (i >= 0) bug(`request ${req.id} leaves with block ${st.table.blocks[i]} where the cache holds ${onPath.blocks[i]} (a duplicate not adopted)`);
  }

  peekCachedTokens(promptTokens: readonly number[]): number {
    // As at start: the last token is always computed, so it is never looked up.
    const lookup = promptTokens.slice(0, -1);
    const inPool = this.#radix?.peek(lookup) ?? 0;
    return Math.max(inPool, this.#host?.match(lookup, lookup.length)?.numTokens ?? 0);
  }

  numReservedBlocks(running: readonly Request[]): number {
    let n = 0;
    for (const r of running) {
      const t = this.#states.get(r)?.table;
      if (t !== undefined) n += t.blocks.length - numBlocksNeeded(r.numComputedTokens, this.#pool.blockSize);
    }
    return n;
  }

  snapshot(running: readonly Request[]): KvSnapshot {
    const radix = this.#radix;
    const pool = this.#pool;
    const h = this.#host;
    const host = h === null ? null : { numEntries: h.numEntries, numTokens: h.numTokens, capacityTokens: this.#opts.hostTierTokens ?? 0, numSaves: h.numSaves, numLoads: h.numLoads, hitTokens: h.numHitTokens };
    const prefixCache = radix === null ? null : { enabled: true, queryTokens: radix.numQueryTokens, hitTokens: radix.numHitTokens + this.#hostExtraHitTokens, numNodes: radix.numNodes, adoptedBlocks: this.#numAdoptedBlocks, host };
    let slack = 0;
    let held = 0;
    for (const r of running) {
      const t = this.#states.get(r)?.table;
      if (t === undefined) continue;
      // Room taken ahead of the prompt's compute is reserved, not waste: count filled blocks only.
      const filled = Math.min(t.blocks.length, numBlocksNeeded(r.numComputedTokens, pool.blockSize));
      slack += filled * pool.blockSize - Math.min(r.numComputedTokens, filled * pool.blockSize);
      held += filled * pool.blockSize;
    }
    return { mode: 'paged', numBlocks: pool.numBlocks, numFreeBlocks: pool.numFree, blockSize: pool.blockSize, usage: pool.numUsed / pool.numBlocks, fragmentation: held === 0 ? 0 : slack / held, prefixCache, numCopyOnWrite: pool.numCopyOnWrite };
  }

  checkInvariants(): void {
    this.#seqIds.checkInvariants();
    const held = [...this.#states.values()].map((s) => s.seqId);
    if (new Set(held).size !== held.length) bug('two running requests share a sequence id');
    const refs = new Map<BlockId, number>();
    this.#paged.countBlockRefs(refs);
    this.#radix?.countBlockRefs(refs);
    this.#pool.checkInvariants(refs);
    this.#paged.checkInvariants();
    this.#host?.checkInvariants();
    if (this.#radix !== null) this.#radix.checkInvariants(held);
    else if (this.#seqIds.numFree + held.length !== this.#opts.maxSequences) bug('sequence ids leaked');
    for (const [req, st] of this.#states) {
      // The allocation rule: room for the whole prompt is held from the start.
      if (st.table.numTokens < Math.max(req.numComputedTokens, req.numPromptTokens)) bug(`request ${req.id} (${req.numPromptTokens} prompt tokens, ${req.numComputedTokens} computed) holds a table of ${st.table.numTokens}`);
    }
  }

  #state(req: Request): SeqState {
    const st = this.#states.get(req);
    if (st === undefined) bug(`request ${req.id} holds no KV state`);
    return st;
  }

  /**
   * The host tier's match for a prompt, when placing it back beats the pool's cache by
   * HOST_MIN_BLOCKS blocks and the pool can hold all the entry's cells at once (they are all
   * loaded before the tail past the match is removed); otherwise null.
   */
  #hostMatch(lookup: readonly number[], inPool: number, numBlocksAll: number): HostMatch | null {
    const m = this.#host?.match(lookup, lookup.length) ?? null;
    if (m === null || m.numTokens < inPool + HOST_MIN_BLOCKS * this.#pool.blockSize) return null;
    const need = Math.max(numBlocksAll, numBlocksNeeded(m.numEntryTokens, this.#pool.blockSize));
    return need <= this.#pool.numBlocks ? m : null;
  }

  /** A sequence leaving the pool: its cells to host memory, unless an entry already holds them all. */
  #saveToHost(req: Request, seqId: SeqId): void {
    if (this.#host === null) return;
    const r = this.#host.add(req.tokensIn(0, req.numComputedTokens));
    if (r === null) return;
    // Before any op that removes its cells (they are pushed after this).
    this.#kvOps.push({ kind: 'save', seqId, key: r.key });
    for (const key of r.dropped) this.#kvOps.push({ kind: 'drop', key });
  }

  /** Evict unreferenced cache beyond `cacheMaxFraction` of the pool. */
  #trimCache(): void {
    const fraction = this.#cacheMaxFraction;
    if (fraction >= 1 || this.#radix === null) return;
    const excess = this.#radix.numEvictableBlocks - Math.floor(fraction * this.#pool.numBlocks);
    if (excess > 0) this.#absorb(this.#radix.evict(excess));
  }

  #evict(numBlocks: number): void {
    if (this.#radix === null || numBlocks <= 0) return;
    this.#absorb(this.#radix.evict(numBlocks));
  }

  /** Evict cache leaves one at a time until an owner's sequence id comes free (or nothing is left). */
  #evictForSeqId(): void {
    const radix = this.#radix;
    if (radix === null) return;
    while (!this.#seqIds.canAcquire()) {
      const r = radix.evict(1);
      this.#absorb(r);
      if (r.numNodesEvicted === 0) return;
    }
  }

  #absorb(r: EvictResult): void {
    this.#kvOps.push(...r.kvOps);
  }
}
