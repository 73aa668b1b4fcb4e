// KvManager over the contiguous slab allocator: the ablation baseline for the paged pool. Each
// request reserves, at start, one slab of prompt + the server-wide output cap (clamped to the pool;
// the API keeps prompt + max_tokens within it), so it never needs to grow and is never preempted
// for room. No prefix cache. Cells play the part of blocks (block size 1) in the snapshot.
//
// Complexity: allocate and release O(free ranges); numReservedBlocks and snapshot O(running).

import type { KvOp, SeqId } from '../plan.ts';
import { ContiguousAllocator } from '../kv/contiguous-allocator.ts';
import type { Slab } from '../kv/contiguous-allocator.ts';
import { SeqIdPool } from '../kv/seq-id-pool.ts';
import type { Request } from '../request.ts';
import type { AllocateResult, KvManager, KvManagerOptions } from './kv-manager.ts';
import type { KvSnapshot } from './scheduler.ts';
import { bug } from '../../util/bug.ts';

interface SeqState {
  readonly seqId: SeqId;
  readonly slab: Slab;
}

export class ContiguousKvManager implements KvManager {
  readonly #opts: KvManagerOptions;
  readonly #seqIds: SeqIdPool;
  readonly #contig: ContiguousAllocator;
  readonly #states = new Map<Request, SeqState>();
  #kvOps: KvOp[] = [];

  constructor(opts: KvManagerOptions) {
    if (opts.mode !== 'contiguous') throw new Error(`ContiguousKvManager: expected mode 'contiguous', got '${opts.mode}'`);
    if (opts.prefixCache) throw new Error('KvManager: the prefix cache needs paged KV (expected prefixCache=false with contiguous)');
    if (!(opts.maxOutputTokens < opts.numCells)) throw new Error(`KvManager: expected the output cap below the pool size, got ${opts.maxOutputTokens} ≥ ${opts.numCells} cells`);
    this.#opts = opts;
    this.#seqIds = new SeqIdPool({ maxSequences: opts.maxSequences });
    this.#contig = new ContiguousAllocator({ numCells: opts.numCells, maxOutputTokens: opts.maxOutputTokens });
  }

  get numFreeSeqIds(): number {
    return this.#seqIds.numFree;
  }

  get numFreeBlocks(): number {
    return this.#contig.numFreeCells;
  }

  takeKvOps(): KvOp[] {
    const ops = this.#kvOps;
    this.#kvOps = [];
    return ops;
  }

  allocate(req: Request, maxNewTokens: number): AllocateResult {
    if (this.#states.has(req)) bug(`request ${req.id} allocated twice`);
    if (!this.#seqIds.canAcquire()) return { ok: false, reason: 'no_seq_id' };
    const sized = Math.min(req.numTokens, this.#opts.numCells - this.#opts.maxOutputTokens);
    if (!this.#contig.canAllocate(sized)) return { ok: false, reason: 'no_blocks' };
    const slab = this.#contig.allocate(sized);
    const seqId = this.#seqIds.acquire();
    this.#states.set(req, { seqId, slab });
    return { ok: true, seqId, numCachedTokens: 0, numNewTokens: Math.min(req.numTokens, maxNewTokens) };
  }

  /** A slab of its own (the contiguous model reserves whole sequences), its first cells shared with the parent's. */
  fork(parent: Request, child: Request, numShared: number): AllocateResult {
    const from = this.#state(parent);
    const r = this.allocate(child, 0);
    if (!r.ok) return r;
    this.#kvOps.push({ kind: 'copy', srcSeqId: from.seqId, dstSeqId: r.seqId, p0: 0, p1: numShared });
    return { ok: true, seqId: r.seqId, numCachedTokens: numShared, numNewTokens: child.numTokens - numShared };
  }

  grow(req: Request, numNewTokens: number): boolean {
    const st = this.#state(req);
    if (req.numComputedTokens + numNewTokens > st.slab.numCells) bug(`request ${req.id} outgrew its contiguous slab`);
    return true;
  }

  onComputed(req: Request): void {
    this.#state(req);
  }

  release(req: Request): void {
    const st = this.#state(req);
    this.#states.delete(req);
    this.#contig.free(st.slab);
    this.#kvOps.push({ kind: 'remove', seqId: st.seqId, p0: 0, p1: -1 });
    this.#seqIds.release(st.seqId);
  }

  peekCachedTokens(): number {
    return 0;
  }

  numReservedBlocks(running: readonly Request[]): number {
    let n = 0;
    for (const r of running) {
      const st = this.#states.get(r);
      if (st !== undefined) n += st.slab.numCells - r.numComputedTokens;
    }
    return n;
  }

  snapshot(): KvSnapshot {
    const c = this.#contig;
    const wanted = c.slabCells(1);
    return { mode: 'contiguous', numBlocks: c.numCells, numFreeBlocks: c.numFreeCells, blockSize: 1, usage: 1 - c.numFreeCells / c.numCells, fragmentation: c.fragmentation(wanted), prefixCache: null, numCopyOnWrite: 0 };
  }

  checkInvariants(): void {
    this.#seqIds.checkInvariants();
    const held = [...this.#states.values()].map((s) => s.seqId);
    if (new Set(held).size !== held.length) bug('two running requests share a sequence id');
    this.#contig.checkInvariants();
    if (this.#seqIds.numFree + held.length !== this.#opts.maxSequences) bug('sequence ids leaked');
  }

  #state(req: Request): SeqState {
    const st = this.#states.get(req);
    if (st === undefined) bug(`request ${req.id} holds no KV state`);
    return st;
  }
}
