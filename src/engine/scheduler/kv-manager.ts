// The scheduler's view of KV memory: one facade over the paged block pool + radix prefix cache,
// or the contiguous slab allocator kept for the ablation, plus llama.cpp sequence ids. It turns
// every decision into the KvOps the runner must apply, in order, before the next forward pass.
//
// The block pool is the accounting model of llama.cpp's unified pool: `numCells / blockSize`
// blocks, a sequence of n tokens holding ceil(n / blockSize) of them, a block shared through the
// cache counted once (seq_cp tags cells, it does not copy them). Accounting ≥ cells really used,
// so a batch the accounting admitted always fits (test/engine/llama-pressure.test.ts checks this).
//
// One subtlety keeps that true with a prefix cache: two requests with the same prefix admitted
// before either finished its prefill both compute that prefix. The cache keeps the first one's
// blocks; the second's sequence still holds its own copies of those cells, and if it goes on to
// own cache nodes (its longer tail), those cells live as long as it does. Its duplicate blocks are
// therefore kept referenced ("shadow" blocks) until the cache releases its sequence id.
//
// Protocol per request (see radix-cache.ts): admit → (grow)* → onComputed (inserts once the
// sequence has caught up) → release (finish, abort or preemption).

import type { KvOp, SeqId } from '../plan.ts';
import { BlockPool } from '../kv/block-pool.ts';
import type { BlockId } from '../kv/block-pool.ts';
import type { BlockTable } from '../kv/block-table.ts';
import { numBlocksNeeded } from '../kv/block-table.ts';
import { ContiguousAllocator } from '../kv/contiguous-allocator.ts';
import type { Slab } from '../kv/contiguous-allocator.ts';
import { PagedKv } from '../kv/paged-kv.ts';
import type { CacheHandle } from '../kv/radix-cache.ts';
import { RadixCache } from '../kv/radix-cache.ts';
import { SeqIdPool } from '../kv/seq-id-pool.ts';
import type { Request } from '../request.ts';
import type { KvSnapshot } from './scheduler.ts';

export interface KvManagerOptions {
  readonly mode: 'paged' | 'contiguous';
  readonly prefixCache: boolean;
  /** Cells of the runner's unified KV pool. */
  readonly numCells: number;
  readonly blockSize: number;
  readonly maxSequences: number;
  /** Server-wide output cap: the contiguous allocator reserves it for every request. */
  readonly maxOutputTokens: number;
  /**
   * Most of the pool (0..1] that unreferenced cached prefixes may keep once their requests are gone.
   * llama.cpp attends over the whole used range of a unified pool, so what the cache retains makes
   * every step slower (bench/native/pool-occupancy.ts); 1 keeps everything until space is needed.
   */
  readonly cacheMaxFraction?: number;
}

interface SeqState {
  readonly seqId: SeqId;
  readonly table: BlockTable | null;
  readonly slab: Slab | null;
  /** Pin on the cache path this sequence inserted (held while it runs). */
  handle: CacheHandle | null;
  /** Tokens of this sequence now stored in the cache (0 before its insert). */
  numCachedTokens: number;
}

export type AdmitResult =
  | { readonly ok: true; readonly seqId: SeqId; readonly numCachedTokens: number; readonly numNewTokens: number }
  | { readonly ok: false; readonly reason: 'no_blocks' | 'no_seq_id' };

export class KvManager {
  readonly #opts: KvManagerOptions;
  readonly #seqIds: SeqIdPool;
  readonly #pool: BlockPool | null;
  readonly #paged: PagedKv | null;
  readonly #radix: RadixCache | null;
  readonly #contig: ContiguousAllocator | null;
  readonly #states = new Map<Request, SeqState>();
  readonly #shadows = new Map<SeqId, BlockId[]>();
  #kvOps: KvOp[] = [];

  constructor(opts: KvManagerOptions) {
    if (opts.mode === 'contiguous' && opts.prefixCache) throw new Error('KvManager: the prefix cache needs paged KV (expected prefixCache=false with contiguous)');
    if (opts.mode === 'contiguous' && !(opts.maxOutputTokens < opts.numCells)) throw new Error(`KvManager: expected the output cap below the pool size, got ${opts.maxOutputTokens} ≥ ${opts.numCells} cells`);
    if (opts.cacheMaxFraction !== undefined && !(opts.cacheMaxFraction > 0 && opts.cacheMaxFraction <= 1)) throw new Error(`KvManager: expected cacheMaxFraction in (0, 1], got ${opts.cacheMaxFraction}`);
    if (!(opts.numCells >= opts.blockSize)) throw new Error(`KvManager: expected numCells ≥ blockSize, got ${opts.numCells} < ${opts.blockSize}`);
    this.#opts = opts;
    this.#seqIds = new SeqIdPool({ maxSequences: opts.maxSequences });
    if (opts.mode === 'paged') {
      this.#pool = new BlockPool({ numBlocks: Math.floor(opts.numCells / opts.blockSize), blockSize: opts.blockSize });
      this.#paged = new PagedKv({ pool: this.#pool });
      this.#radix = opts.prefixCache ? new RadixCache({ pool: this.#pool, seqIdPool: this.#seqIds }) : null;
      this.#contig = null;
    } else {
      this.#pool = null;
      this.#paged = null;
      this.#radix = null;
      this.#contig = new ContiguousAllocator({ numCells: opts.numCells, maxOutputTokens: opts.maxOutputTokens });
    }
  }

  get numFreeSeqIds(): number {
    return this.#seqIds.numFree;
  }

  /** KvOps decided since the last call, in the order the runner must apply them. */
  takeKvOps(): KvOp[] {
    const ops = this.#kvOps;
    this.#kvOps = [];
    return ops;
  }

  /**
   * Give a waiting request a sequence, its cached prefix and room for up to `maxNewTokens` of its
   * tokens. Nothing changes when it fails (evictions it made stay: they were unpinned cache).
   */
  admit(req: Request, maxNewTokens: number): AdmitResult {
    if (this.#states.has(req)) throw new Error(`bug: request ${req.id} admitted twice`);
    if (!this.#seqIds.canAcquire()) this.#evictForSeqId();
    if (!this.#seqIds.canAcquire()) return { ok: false, reason: 'no_seq_id' };

    if (this.#contig !== null) {
      // A slab is prompt + the server-wide output cap, clamped to the pool (the API keeps prompt + max_tokens within it).
      const sized = Math.min(req.numTokens, this.#opts.numCells - this.#opts.maxOutputTokens);
      if (!this.#contig.canAllocate(sized)) return { ok: false, reason: 'no_blocks' };
      const slab = this.#contig.allocate(sized);
      const seqId = this.#seqIds.acquire();
      this.#states.set(req, { seqId, table: null, slab, handle: null, numCachedTokens: 0 });
      return { ok: true, seqId, numCachedTokens: 0, numNewTokens: Math.min(req.numTokens, maxNewTokens) };
    }

    const paged = this.#paged!;
    const pool = this.#pool!;
    // The last token is always computed: its logits give the first sample.
    const match = this.#radix?.match(req.tokensIn(0, req.numTokens - 1)) ?? null;
    try {
      const numCached = match?.numTokens ?? 0;
      const numNew = Math.min(req.numTokens - numCached, maxNewTokens);
      const need = numBlocksNeeded(numCached + numNew, pool.blockSize) - (match?.blocks.length ?? 0);
      // The match is pinned: evicting here cannot take the path just matched.
      if (!pool.canAllocate(need)) this.#evict(need - pool.numFree);
      if (!pool.canAllocate(need)) return { ok: false, reason: 'no_blocks' };
      const seqId = this.#seqIds.acquire();
      const table = paged.createTable();
      if (match !== null && numCached > 0) {
        paged.sharePrefix(table, match.blocks, numCached);
        this.#kvOps.push({ kind: 'copy', srcSeqId: match.ownerSeqId!, dstSeqId: seqId, p0: 0, p1: numCached });
      }
      paged.append(table, numNew);
      this.#states.set(req, { seqId, table, slab: null, handle: null, numCachedTokens: 0 });
      return { ok: true, seqId, numCachedTokens: numCached, numNewTokens: numNew };
    } finally {
      if (match !== null) this.#radix!.release(match.handle);
    }
  }

  /** Reserve room for `numNewTokens` more tokens of a running request, evicting cache if needed. */
  grow(req: Request, numNewTokens: number): boolean {
    const st = this.#state(req);
    if (st.slab !== null) {
      if (req.numComputedTokens + numNewTokens > st.slab.numCells) throw new Error(`bug: request ${req.id} outgrew its contiguous slab`);
      return true;
    }
    const paged = this.#paged!;
    const need = paged.numBlocksToAppend(st.table!, numNewTokens);
    if (!this.#pool!.canAllocate(need)) this.#evict(need - this.#pool!.numFree);
    if (!this.#pool!.canAllocate(need)) return false;
    paged.append(st.table!, numNewTokens);
    return true;
  }

  /** After a step: a sequence that has caught up with all its tokens puts its prefix in the cache (once per admission). */
  onComputed(req: Request): void {
    const st = this.#state(req);
    if (this.#radix === null || st.handle !== null || req.numComputedTokens < req.numTokens) return;
    const r = this.#radix.insert(req.tokensIn(0, req.numComputedTokens), st.table!.blocks, st.seqId);
    st.handle = r.handle;
    st.numCachedTokens = r.numCachedTokens;
  }

  /** The request leaves the running set (finished, aborted or preempted): its KV goes back. */
  release(req: Request): void {
    const st = this.#state(req);
    this.#states.delete(req);
    if (st.slab !== null) {
      this.#contig!.free(st.slab);
      this.#kvOps.push({ kind: 'remove', seqId: st.seqId, p0: 0, p1: -1 });
      this.#seqIds.release(st.seqId);
      return;
    }
    const radix = this.#radix;
    const table = st.table!;
    let shadow: BlockId[] = [];
    if (radix !== null && st.handle !== null) {
      // Blocks of ours the cache did not adopt, whose cells our sequence still holds.
      const onPath = radix.match(req.tokensIn(0, st.numCachedTokens), { recordStats: false });
      shadow = table.blocks.slice(0, onPath.blocks.length).filter((b, i) => b !== onPath.blocks[i]);
      radix.release(onPath.handle);
      radix.release(st.handle);
      for (const b of shadow) this.#pool!.incRef(b);
    }
    this.#kvOps.push({ kind: 'remove', seqId: st.seqId, p0: st.numCachedTokens, p1: -1 });
    this.#paged!.free(table);
    if (radix !== null && radix.ownsNodes(st.seqId)) {
      if (shadow.length > 0) this.#shadows.set(st.seqId, shadow);
      this.#trimCache();
      return; // the cache holds the id now (until eviction gives it back)
    }
    for (const b of shadow) this.#pool!.decRef(b);
    if (st.numCachedTokens > 0) this.#kvOps.push({ kind: 'remove', seqId: st.seqId, p0: 0, p1: -1 });
    this.#seqIds.release(st.seqId);
  }

  snapshot(running: readonly Request[]): KvSnapshot {
    const radix = this.#radix;
    const prefixCache = radix === null ? null : { enabled: true, queryTokens: radix.numQueryTokens, hitTokens: radix.numHitTokens, numNodes: radix.numNodes };
    if (this.#contig !== null) {
      const c = this.#contig;
      const wanted = c.slabCells(1);
      return { mode: 'contiguous', numBlocks: c.numCells, numFreeBlocks: c.numFreeCells, blockSize: 1, usage: 1 - c.numFreeCells / c.numCells, fragmentation: c.fragmentation(wanted), prefixCache, numCopyOnWrite: 0 };
    }
    const pool = this.#pool!;
    let slack = 0;
    let held = 0;
    for (const r of running) {
      const t = this.#states.get(r)?.table;
      if (t == null) continue;
      slack += t.blocks.length * pool.blockSize - t.numTokens;
      held += t.blocks.length * pool.blockSize;
    }
    return { mode: 'paged', numBlocks: pool.numBlocks, numFreeBlocks: pool.numFree, blockSize: pool.blockSize, usage: pool.numUsed / pool.numBlocks, fragmentation: held === 0 ? 0 : slack / held, prefixCache, numCopyOnWrite: pool.numCopyOnWrite };
  }

  checkInvariants(): void {
    this.#seqIds.checkInvariants();
    const held = [...this.#states.values()].map((s) => s.seqId);
    if (new Set(held).size !== held.length) throw new Error('bug: two running requests share a sequence id');
    if (this.#contig !== null) {
      this.#contig.checkInvariants();
      if (this.#seqIds.numFree + held.length !== this.#opts.maxSequences) throw new Error('bug: sequence ids leaked');
      return;
    }
    const refs = new Map<BlockId, number>();
    this.#paged!.countBlockRefs(refs);
    this.#radix?.countBlockRefs(refs);
    for (const blocks of this.#shadows.values()) for (const b of blocks) refs.set(b, (refs.get(b) ?? 0) + 1);
    this.#pool!.checkInvariants(refs);
    this.#paged!.checkInvariants();
    if (this.#radix !== null) this.#radix.checkInvariants(held);
    else if (this.#seqIds.numFree + held.length !== this.#opts.maxSequences) throw new Error('bug: sequence ids leaked');
    for (const s of this.#shadows.keys()) if (!this.#radix?.ownsNodes(s)) throw new Error(`bug: shadow blocks kept for sequence ${s}, which owns no cache node`);
  }

  #state(req: Request): SeqState {
    const st = this.#states.get(req);
    if (st === undefined) throw new Error(`bug: request ${req.id} holds no KV state`);
    return st;
  }

  /** Evict unreferenced cache beyond `cacheMaxFraction` of the pool. */
  #trimCache(): void {
    const fraction = this.#opts.cacheMaxFraction ?? 1;
    if (fraction >= 1 || this.#radix === null) return;
    const excess = this.#radix.numEvictableBlocks - Math.floor(fraction * this.#pool!.numBlocks);
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

  #absorb(r: { readonly kvOps: readonly KvOp[]; readonly releasedSeqIds: readonly SeqId[] }): void {
    this.#kvOps.push(...r.kvOps);
    for (const s of r.releasedSeqIds) {
      for (const b of this.#shadows.get(s) ?? []) this.#pool!.decRef(b);
      this.#shadows.delete(s);
    }
  }
}
