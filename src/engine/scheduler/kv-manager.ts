// The scheduler's view of KV memory: one interface, two implementations chosen by a factory
// (kv-manager-factory.ts; vLLM's get_kv_cache_coordinator style):
//   - PagedKvManager (paged-kv-manager.ts): the block pool + the radix prefix cache (or none);
//   - ContiguousKvManager (contiguous-kv-manager.ts): one slab per request, the ablation baseline.
// Both also own the llama.cpp sequence ids, and turn every decision into the KvOps the runner must
// apply, in order, before the next forward pass.
//
// Protocol per request: allocate (once per start: first start, or again after a preemption) →
// (grow)* → onComputed after every step → release (finish, abort or preemption).
//
// The rule that keeps allocation from thrashing (issue 9): `allocate` takes room for the WHOLE
// prompt (less what the cache holds) before the first chunk runs, and keeps a watermark of free
// blocks for the running requests' decode growth; a prompt that does not fit waits. So only
// decode growth can run the pool dry, and the scheduler preempts only for that.

import type { KvOp, SeqId } from '../plan.ts';
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
   * Most of the pool [0, 1] that unreferenced cached prefixes may keep once their requests are gone.
   * llama.cpp attends over the whole used range of a unified pool, so what the cache retains makes
   * every step slower (bench/native/pool-occupancy.ts); 1 keeps everything until space is needed;
   * 0 keeps nothing idle (prefixes are shared only while a request holds them, and with the host
   * tier an idle prefix lives in host memory only). With 0, every computed prompt is offered to the
   * cache while its request runs (cacheRetain does not apply: nothing stays after). Absent: 0 with
   * the host tier, 1 without (docs/per-token.md §15).
   */
  readonly cacheMaxFraction?: number;
  /**
   * What the prefix cache keeps when a prompt has been computed: 'seen' (default) only the part an
   * earlier prompt also had (src/engine/kv/doorkeeper.ts: unique prompts, retained, slow every
   * decode), 'all' the whole prompt.
   */
  readonly cacheRetain?: 'all' | 'seen';
  /**
   * Tokens the prefix cache's host tier keeps in host memory (src/engine/kv/host-tier.ts): a
   * sequence leaving the pool is saved, and a later prompt that begins with it is placed back
   * instead of recomputed. 0 or absent: off. Paged KV with the prefix cache only.
   */
  readonly hostTierTokens?: number;
  /**
   * Share of the pool [0, 0.5] a new request may not take while others run: room kept for their
   * decode growth (paged only; default 0.01, as vLLM). Measured on the mixed-size overload
   * (results/kv-mixed-overload/sim/after.md): 0 gives 0.15 preemptions per completed request,
   * 0.01 gives 0.01, 0.05 gives 0.00, at the same throughput.
   */
  readonly watermarkFraction?: number;
}

export type AllocateResult =
  | { readonly ok: true; readonly seqId: SeqId; readonly numCachedTokens: number; readonly numNewTokens: number }
  /** `never_fits`: the request needs more KV than the whole pool holds; waiting cannot help. */
  | { readonly ok: false; readonly reason: 'no_blocks' | 'no_seq_id' | 'never_fits' };

export interface KvManager {
  readonly numFreeSeqIds: number;
  /** Free blocks (cells, for the contiguous allocator) right now. */
  readonly numFreeBlocks: number;
  /** KvOps decided since the last call, in the order the runner must apply them. */
  takeKvOps(): KvOp[];
  /**
   * Start a waiting request: a sequence, its cached prefix and room for its whole prompt (and
   * any tokens it generated before a preemption); feed it at most `maxNewTokens` this step.
   * Nothing changes when it fails (evictions it made stay: they were unpinned cache).
   */
  allocate(req: Request, maxNewTokens: number): AllocateResult;
  /**
   * Parallel sampling: start `child` as a fork of the running `parent`, sharing the cells of its
   * first `numShared` tokens (a seq_cp: copy-on-write in the accounting) plus room for the rest of
   * the child's prompt. Nothing changes when it fails; the child then starts on its own.
   */
  fork(parent: Request, child: Request, numShared: number): AllocateResult;
  /** Room for `numNewTokens` more tokens of a running request (evicting cache if needed); false when there is none. */
  grow(req: Request, numNewTokens: number): boolean;
  /** After a step: a sequence that caught up with all its tokens puts its prefix in the cache (once per start). */
  onComputed(req: Request): void;
  /** The request leaves the running set (finished, aborted or preempted): its KV goes back. */
  release(req: Request): void;
  /** Prompt tokens the prefix cache holds now, with no side effect (0 without a cache). For admission control. */
  peekCachedTokens(promptTokens: readonly number[]): number;
  /** Blocks (cells, contiguous) allocated to running requests ahead of their computed tokens. */
  numReservedBlocks(running: readonly Request[]): number;
  snapshot(running: readonly Request[]): KvSnapshot;
  checkInvariants(): void;
}
