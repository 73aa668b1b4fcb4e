// Batching schedulers: `continuous` (iteration-level, rungs 3–4 of the ablation ladder) and
// `static` (rung 2: fill a batch, run it to completion, no late joins). Both share the KV
// protocol (kv-manager.ts) and one rule for prefill and decode: each step gives every scheduled
// request min(numTokens − numComputedTokens, what is left of the budget) tokens, so chunked
// prefill, prefix hits and decode need no special case.
//
// Each continuous step:
//   1. drop requests whose client left (cost guard: only when an abort is pending);
//   2. running requests in deadline order get their next tokens (decode or the next prefill
//      chunk), under the per-step token budget and the free blocks — when blocks run out for decode
//      growth, the running request with the latest deadline is preempted (recompute) to the front
//      of the queue, unless it was already preempted `maxPreemptions` times: then it is kept and
//      the growing request waits a step (if no request at all could run, the latest deadline goes
//      anyway, counted in numForcedPreemptions — nothing else breaks that deadlock);
//   3. waiting requests are started in queue (EDF) order while the budget, sequence ids and blocks
//      last. A request starts only when its WHOLE prompt fits beside the running requests and a
//      watermark (kv-manager.ts), so prompts never evict each other half way (issue 9: 690
//      preemptions for 76 requests when only the first chunk's blocks were checked). Why starting
//      stopped is published in the snapshot (`stopReason`).
// Prompt tokens in one step are capped by `prefillChunkTokens` (all requests together), which is
// what bounds a step's time and so the inter-token latency of everyone decoding; a step in which
// nothing decodes (decode-first) takes the whole token budget instead, as nobody waits on it. With a step-time
// budget (`stepBudget`, continuous decode-first only) the cap is instead sized per step from a cost
// model fitted to the steps run so far (step-cost.ts): a step with decode rows carries the chunk
// that keeps it near the target time at the pool's current depth, a step without takes the whole
// token budget.
// `decode-first` (default) gives every decoding request its token before any prompt chunk;
// `prefill-first` gives prompt chunks and new requests the budget first — measured to stall every
// stream for seconds while prompts queue (docs/benchmarks.md, results/peer/rate-0.6/headroom-r4).

import type { Request } from '../request.ts';
import { RequestStatus, samplerHistory } from '../request.ts';
import type { EndRequest, FinishReason } from '../request.ts';
import { OutputCollector } from '../outputs.ts';
import type { RequestOutput } from '../outputs.ts';
import type { StepItem, StepResult } from '../plan.ts';
import type { KvManager, KvManagerOptions } from './kv-manager.ts';
import { createKvManager } from './kv-manager-factory.ts';
import type { RequestQueue } from './request-queue.ts';
import type { ScheduledItem, Scheduler, SchedulerPlan, SchedulerSnapshot, StopReason } from './scheduler.ts';
import { emptySchedulerPlan } from './scheduler.ts';
import { ForkGroups } from './fork-groups.ts';
import { StepBudget } from './step-cost.ts';
import type { StepCostOptions } from './step-cost.ts';
import { bug } from '../../util/bug.ts';

/** Preemptions after which a request is not preempted again before it finishes (by default). */
export const DEFAULT_MAX_PREEMPTIONS = 2;

export interface BatchSchedulerOptions {
  readonly policy: 'continuous' | 'static';
  /** Most tokens in one forward pass (the chunked-prefill budget). */
  readonly maxBatchTokens: number;
  /** Most requests running at once (≤ sequence ids). */
  readonly maxRunning: number;
  /** Most prompt tokens in one step, all requests together (≤ maxBatchTokens). */
  readonly prefillChunkTokens: number;
  /**
   * The runner computes a step's decoding rows apart from its prompt chunks (RunnerInfo.
   * decodeRowsApart): align the prompt rows alone to ROW_ALIGN, not decode plus prompt rows.
   */
  readonly alignPromptRowsAlone?: boolean;
  readonly priority: 'prefill-first' | 'decode-first';
  /** static: start a batch once this many are waiting ... */
  readonly staticBatchSize: number;
  /** ... or once the oldest waiting request has waited this long, ms. */
  readonly staticWaitMs: number;
  readonly kv: KvManagerOptions;
  /** The wait queue (the factory passes an EDF WaitQueue). */
  readonly queue: RequestQueue;
  /** A request preempted this many times is not chosen as a victim again (default 2). */
  readonly maxPreemptions?: number;
  /**
   * Step-time budget (continuous, decode-first): size prompt chunks from measured step costs.
   * undefined/null: the static prefillChunkTokens cap. baseChunkTokens and maxChunkTokens come
   * from prefillChunkTokens and maxBatchTokens.
   */
  readonly stepBudget?: (Pick<StepCostOptions, 'targetMs' | 'minChunkTokens' | 'warmupSteps'> & { readonly sizeChunks?: boolean }) | null;
}

/**
 * Rows per step come in multiples of this where the prompt budget allows: llama.cpp's CPU attention
 * runs much faster on a multiple of 64 rows than one off it (at position 2,048: 64 rows 41 ms, 63
 * rows 57 ms; 256 rows 100 ms, 257 rows 121 ms; no difference at position 0; results/per-token/
 * row-alignment.txt), so a 256-token chunk beside one decode row cost 20% more than it had to.
 * Where the runner computes decoding rows in a call of their own (llama, step-layout.ts), the
 * prompt rows are what must come out whole.
 */
export const ROW_ALIGN = 64;

/** The prompt budget trimmed so that decode rows plus prompt rows make a whole number of ROW_ALIGN. */
export function alignedPromptBudget(decodeRows: number, promptBudget: number): number {
  const total = decodeRows + promptBudget;
  if (total < ROW_ALIGN || promptBudget <= 0) return promptBudget;
  const aligned = Math.floor(total / ROW_ALIGN) * ROW_ALIGN - decodeRows;
  return aligned > 0 ? aligned : promptBudget;
}

/** What is left of one step's budget while it is being planned. */
interface Budget {
  tokens: number;
  prefillTokens: number;
}

export class BatchScheduler implements Scheduler {
  readonly name: 'continuous' | 'static';
  readonly #opts: BatchSchedulerOptions;
  readonly #kv: KvManager;
  readonly #waiting: RequestQueue;
  readonly #maxPreemptions: number;
  /** Running requests, in the order they started. */
  #running: Request[] = [];
  #numAbortsPending = 0;
  /** Static batching: the oldest arrival in the wait queue, or null when it must be recomputed. */
  #oldestWaitingMs: number | null = null;
  #numPreemptions = 0;
  #numForcedPreemptions = 0;
  #numRunnerRefusals = 0;
  readonly #outputs = new OutputCollector();
  /** Parallel-sampling followers parked on their leader until it can be forked (fork-groups.ts). */
  readonly #forks = new ForkGroups();
  #stopReason: StopReason = 'none_waiting';
  readonly #stepBudget: StepBudget | null;
  /** The budget sizes prompt chunks (else its model only watches step times, for the slow-step warning). */
  readonly #sizeChunks: boolean;
  /** The pool's estimated cells in use when the step in flight was planned (fed to the cost model with its time). */
  #plannedKvCells = 0;

  constructor(opts: BatchSchedulerOptions) {
    const ints: (keyof BatchSchedulerOptions)[] = ['maxBatchTokens', 'maxRunning', 'prefillChunkTokens', 'staticBatchSize'];
    for (const k of ints) {
      const v = opts[k];
      if (typeof v !== 'number' || !Number.isInteger(v) || v < 1) throw new Error(`BatchScheduler: expected ${k} to be a positive integer, got ${JSON.stringify(v)}`);
    }
    if (opts.maxRunning > opts.kv.maxSequences) throw new Error(`BatchScheduler: expected maxRunning ≤ ${opts.kv.maxSequences} sequence ids, got ${opts.maxRunning}`);
    const maxPreemptions = opts.maxPreemptions ?? DEFAULT_MAX_PREEMPTIONS;
    if (!Number.isInteger(maxPreemptions) || maxPreemptions < 0) throw new Error(`BatchScheduler: expected maxPreemptions to be a non-negative integer, got ${JSON.stringify(opts.maxPreemptions)}`);
    this.name = opts.policy;
    this.#opts = opts;
    this.#kv = createKvManager(opts.kv);
    this.#waiting = opts.queue;
    this.#maxPreemptions = maxPreemptions;
    this.#stepBudget =
      opts.stepBudget != null && opts.policy === 'continuous' ? new StepBudget({ ...opts.stepBudget, baseChunkTokens: opts.prefillChunkTokens, maxChunkTokens: opts.maxBatchTokens }) : null;
    this.#sizeChunks = this.#stepBudget !== null && opts.priority === 'decode-first' && opts.stepBudget?.sizeChunks !== false;
  }

  /** The step-time budget's model and target (null when the static chunk cap is in use). */
  get stepBudget(): StepBudget | null {
    return this.#stepBudget;
  }

  get numUnfinished(): number {
    return this.#waiting.size + this.#forks.size + this.#running.length;
  }


  /** Prompt tokens the prefix cache holds now for this prompt; pure (no LRU touch, pin or statistics). */
  peekCachedTokens(promptTokens: readonly number[]): number {
    return this.#kv.peekCachedTokens(promptTokens);
  }

  /** Preemptions of a request already at the cap, to break a step where nothing could run. */
  get numForcedPreemptions(): number {
    return this.#numForcedPreemptions;
  }

  /** Times llama.cpp refused a batch the accounting accepted (must stay 0). */
  get numRunnerRefusals(): number {
    return this.#numRunnerRefusals;
  }

  add(req: Request): void {
    if (req.abortRequested) this.#numAbortsPending++;
    if (this.#forks.park(req)) return;
    this.#waiting.push(req);
    if (this.#oldestWaitingMs !== null) this.#oldestWaitingMs = Math.min(this.#oldestWaitingMs, req.arrivalMs);
  }

  abort(req: Request, reason: EndRequest = 'abort'): void {
    req.requestAbort(reason);
    this.#numAbortsPending++;
  }

  schedule(nowMs: number): SchedulerPlan {
    this.#dropAborted(nowMs);
    const budget: Budget = { tokens: this.#opts.maxBatchTokens, prefillTokens: this.#opts.prefillChunkTokens };
    // The pool before this step, for the step-cost model (every continuous policy feeds it).
    if (this.#stepBudget !== null) this.#plannedKvCells = this.#kvCellsInUse();
    const scheduled: ScheduledItem[] = [];
    let wakeAtMs: number | null = null;
    if (this.#opts.policy === 'static') {
      this.#stopReason = 'static_batch_running';
      if (this.#running.length === 0) {
        const fill = this.#staticReady(nowMs);
        // The whole batch starts now (prompts beyond this step's budget get their tokens in later steps).
        if (fill === true) this.#startWaiting(budget, scheduled, Math.min(this.#opts.staticBatchSize, this.#opts.maxRunning), nowMs, true);
        else {
          wakeAtMs = fill;
          this.#stopReason = fill === null ? 'none_waiting' : 'static_filling';
        }
      }
      this.#continueRunning(budget, scheduled);
    } else if (this.#opts.priority === 'prefill-first') {
      this.#continueRunning(budget, scheduled, 'prefill');
      this.#startWaiting(budget, scheduled, this.#opts.maxRunning, nowMs);
      this.#continueRunning(budget, scheduled, 'decode');
    } else {
      this.#continueRunning(budget, scheduled, 'decode');
      // The tightest TPOT budget among the decoding requests: a step carrying them stays within it.
      let tpot: number | null = null;
      for (const s of scheduled) if (s.request.tpotMs !== null && (tpot === null || s.request.tpotMs < tpot)) tpot = s.request.tpotMs;
      if (this.#stepBudget !== null && (this.#sizeChunks || tpot !== null)) {
        // The chunk's position: the deepest prompt under way (the conservative guess), else a new one at 0.
        let chunkPos = 0;
        for (const r of this.#running) if (r.numComputedTokens < r.numPromptTokens) chunkPos = Math.max(chunkPos, r.numComputedTokens);
        const within = { target: this.#sizeChunks, stepCapMs: tpot };
        budget.prefillTokens = Math.min(budget.tokens, this.#stepBudget.prefillTokens(scheduled.length, chunkPos, within));
      } else if (scheduled.length === 0) {
        // Nothing is decoding, so no stream waits on this step: prompts take the whole token budget
        // (fewer, larger llama_decode calls; docs/per-token.md).
        budget.prefillTokens = budget.tokens;
      }
      budget.prefillTokens = alignedPromptBudget(this.#opts.alignPromptRowsAlone === true ? 0 : scheduled.length, budget.prefillTokens);
      this.#continueRunning(budget, scheduled, 'prefill');
      this.#startWaiting(budget, scheduled, this.#opts.maxRunning, nowMs);
    }
    if (scheduled.length === 0 && this.#running.length > 0) this.#unstick(budget, scheduled, nowMs);
    const kvOps = this.#kv.takeKvOps();
    const outputs = this.#outputs.take();
    if (scheduled.length === 0) return { ...emptySchedulerPlan(wakeAtMs), runner: { kvOps, items: [] }, outputs };
    const items = scheduled.map(({ request: r, numNewTokens: n }): StepItem => ({
      requestId: r.id,
      seqId: r.seqId!,
      tokens: r.tokensIn(r.numComputedTokens, r.numComputedTokens + n),
      startPos: r.numComputedTokens,
      sample: r.numComputedTokens + n === r.numTokens,
      resetSampler: !r.samplerStarted,
      sampling: r.sampling,
      ...samplerHistory(r),
    }));
    return { runner: { kvOps, items }, scheduled, wakeAtMs: null, outputs };
  }

  update(plan: SchedulerPlan, result: StepResult, nowMs: number): RequestOutput[] {
    if (!result.ok) {
      const live = plan.scheduled.map((s) => s.request).filter((r) => r.status === RequestStatus.RUNNING);
      if (result.reason === 'no_kv_slot') {
        // The accounting accepted a batch the runner refused: recover by recomputing (and count it: it must stay 0).
        this.#numRunnerRefusals++;
        for (const r of live) this.#preempt(r);
      } else {
        for (const r of live) this.#end(r, 'error', nowMs, `the model runner failed: ${result.message}`);
      }
      return this.#outputs.take();
    }
    if (this.#stepBudget !== null) {
      let decodeRows = 0;
      let promptRows = 0;
      let ownCells = 0;
      let promptCells = 0;
      for (const { request: r, numNewTokens: n } of plan.scheduled) {
        // Rows at positions c .. c+n-1 attend over c+1 .. c+n cells of their own sequence.
        const cells = n * r.numComputedTokens + (n * (n + 1)) / 2;
        if (n === 1 && r.numComputedTokens >= r.numPromptTokens) decodeRows++;
        else {
          promptRows += n;
          promptCells += cells;
        }
        ownCells += cells;
      }
      // The pool as the step saw it: what it held plus the cells this step wrote.
      this.#stepBudget.observe({ decodeRows, promptRows, ownCells, promptCells, poolCells: this.#plannedKvCells + decodeRows + promptRows }, result.computeMs);
    }
    plan.scheduled.forEach(({ request: req, numNewTokens }, i) => {
      if (req.status !== RequestStatus.RUNNING) return;
      req.numComputedTokens += numNewTokens;
      req.samplerStarted = true;
      // Caught up with every token it had: its prefix goes into the cache now, before the sampled token extends it.
      this.#kv.onComputed(req);
      if (this.#forks.size > 0) this.#forkFollowers(req, nowMs);
      const token = result.sampled[i];
      if (token == null) return;
      const reason = req.appendToken(token, nowMs, result.logprobs?.[i] ?? null);
      this.#outputs.touch(req);
      if (reason !== null) this.#end(req, reason, nowMs);
    });
    return this.#outputs.take();
  }

  snapshot(): SchedulerSnapshot {
    return {
      name: this.name,
      numWaiting: this.#waiting.size + this.#forks.size,
      numRunning: this.#running.length,
      numFreeSeqIds: this.#kv.numFreeSeqIds,
      maxSequences: this.#opts.kv.maxSequences,
      numPreemptions: this.#numPreemptions,
      kv: this.#kv.snapshot(this.#running),
      stopReason: this.#stopReason,
      numReservedBlocks: this.#kv.numReservedBlocks(this.#running),
      numFreeBlocks: this.#kv.numFreeBlocks,
    };
  }

  checkInvariants(): void {
    for (const r of this.#running) {
      if (r.status !== RequestStatus.RUNNING || r.seqId === null) bug(`running request ${r.id} in status ${r.status}`);
    }
    for (const r of this.#waiting) if (r.status !== RequestStatus.WAITING) bug(`waiting request ${r.id} in status ${r.status}`);
    for (const [leader, followers] of this.#forks.entries()) {
      if (leader.numComputedTokens >= leader.numPromptTokens || !(leader.status === RequestStatus.WAITING || leader.status === RequestStatus.RUNNING)) bug(`followers parked on ${leader.id} (status ${leader.status}, ${leader.numComputedTokens} computed)`);
      for (const f of followers) if (f.status !== RequestStatus.WAITING) bug(`parked follower ${f.id} in status ${f.status}`);
    }
    this.#kv.checkInvariants();
  }

  /** Static batching: true when a batch should start now, else the time to look again (null: wait for arrivals). */
  #staticReady(nowMs: number): true | number | null {
    if (this.#waiting.size === 0) return null;
    if (this.#waiting.size >= this.#opts.staticBatchSize) return true;
    // Cost guard: the O(queue) scan for the oldest arrival runs once per change of the queue's
    // membership by a start or a preemption, not on every idle wake-up.
    if (this.#oldestWaitingMs === null) {
      let oldest = Infinity;
      for (const r of this.#waiting) oldest = Math.min(oldest, r.arrivalMs);
      this.#oldestWaitingMs = oldest;
    }
    const due = this.#oldestWaitingMs + this.#opts.staticWaitMs;
    return nowMs >= due ? true : due;
  }

  /** Give running requests their next tokens, earliest deadline first; preempt for decode growth (see the header). */
  #continueRunning(budget: Budget, scheduled: ScheduledItem[], only?: 'prefill' | 'decode'): void {
    const taken = new Set(scheduled.map((s) => s.request));
    const order = [...this.#running].sort((a, b) => a.deadlineMs - b.deadlineMs);
    for (const req of order) {
      if (budget.tokens === 0) return;
      if (taken.has(req) || req.status !== RequestStatus.RUNNING) continue;
      const remaining = req.numTokens - req.numComputedTokens;
      const isDecode = remaining === 1 && req.numComputedTokens >= req.numPromptTokens;
      if (only === 'prefill' && isDecode) continue;
      if (only === 'decode' && !isDecode) continue;
      const n = isDecode ? 1 : this.#forks.capFor(req, Math.min(remaining, budget.tokens, budget.prefillTokens));
      if (n === 0 || !this.#makeRoom(req, n, taken)) continue;
      scheduled.push({ request: req, numNewTokens: n });
      taken.add(req);
      budget.tokens -= n;
      if (!isDecode) budget.prefillTokens -= n;
    }
  }

  /**
   * Cells of llama.cpp's pool holding KV now, as the accounting sees them: paged, every referenced
   * block (running sequences and cached prefixes, which attention sweeps over too) less what running
   * requests reserved but have not computed yet (a table is sized for the whole prompt at start);
   * contiguous, the running requests' computed tokens. A lower bound on the range llama.cpp
   * attends over, which also counts holes; the cost model's fit absorbs the difference.
   */
  #kvCellsInUse(): number {
    const kv = this.#opts.kv;
    let uncomputed = 0;
    let computed = 0;
    for (const r of this.#running) {
      uncomputed += r.numTokens - r.numComputedTokens;
      computed += r.numComputedTokens;
    }
    if (kv.mode !== 'paged') return computed;
    return Math.max(0, kv.numCells - this.#kv.numFreeBlocks * kv.blockSize - uncomputed);
  }

  /** Room for `n` more tokens of `req`, preempting requests below the cap; false when it must wait (or was preempted itself). */
  #makeRoom(req: Request, n: number, taken: ReadonlySet<Request>): boolean {
    while (!this.#kv.grow(req, n)) {
      const victim = this.#latestDeadline(taken, (r) => r.numPreemptions < this.#maxPreemptions);
      if (victim === undefined) return false;
      this.#preempt(victim);
      if (victim === req) return false;
    }
    return true;
  }

  /**
   * Nothing could run although requests are running: each needs a block and every other one is at
   * the preemption cap. A lone request that cannot grow never will (its tokens fill the pool): it
   * ends with an error. Otherwise the latest deadline goes regardless of the cap.
   */
  #unstick(budget: Budget, scheduled: ScheduledItem[], nowMs: number): void {
    if (this.#running.length === 1) {
      const [req] = this.#running;
      this.#end(req!, 'error', nowMs, `request ${req!.id} needs more KV cells than the pool holds (${req!.numTokens} tokens)`);
      return;
    }
    const victim = this.#latestDeadline(new Set(), () => true)!;
    this.#numForcedPreemptions++;
    this.#preempt(victim);
    this.#continueRunning(budget, scheduled);
  }

  /** Start waiting requests in queue order while budget, sequence ids and blocks last; records why it stopped. */
  #startWaiting(budget: Budget, scheduled: ScheduledItem[], maxRunning: number, nowMs: number, wholeBatch = false): void {
    for (;;) {
      const req = this.#waiting.peek();
      if (req === undefined) return void (this.#stopReason = 'none_waiting');
      if (this.#running.length >= maxRunning) return void (this.#stopReason = 'max_running');
      if (Math.min(budget.tokens, budget.prefillTokens) <= 0 && !wholeBatch) return void (this.#stopReason = 'budget');
      const r = this.#kv.allocate(req, this.#forks.capFor(req, Math.min(budget.tokens, budget.prefillTokens)));
      if (!r.ok) {
        if (r.reason !== 'never_fits') return void (this.#stopReason = r.reason); // head-of-line: queue order is kept; the next step tries again
        this.#waiting.pop();
        this.#oldestWaitingMs = null;
        req.finish('error', nowMs, `request ${req.id} needs ${req.numTokens} KV cells at start, more than the pool holds`);
        this.#outputs.touch(req);
        continue;
      }
      this.#waiting.pop();
      this.#oldestWaitingMs = null;
      req.status = RequestStatus.RUNNING;
      req.seqId = r.seqId;
      req.numComputedTokens = r.numCachedTokens;
      if (req.numPreemptions === 0) req.numCachedTokens = r.numCachedTokens;
      req.samplerStarted = false;
      req.scheduledMs ??= nowMs;
      this.#running.push(req);
      if (r.numNewTokens > 0) scheduled.push({ request: req, numNewTokens: r.numNewTokens });
      else if (this.#forks.size > 0) this.#forkFollowers(req, nowMs); // a cache hit already covers all but its last prompt token
      budget.tokens -= r.numNewTokens;
      budget.prefillTokens -= r.numNewTokens;
    }
  }

  #latestDeadline(exclude: ReadonlySet<Request>, eligible: (r: Request) => boolean): Request | undefined {
    let victim: Request | undefined;
    for (const r of this.#running) {
      if (exclude.has(r) || !eligible(r)) continue;
      if (victim === undefined || r.deadlineMs > victim.deadlineMs) victim = r;
    }
    return victim;
  }

  /** Recompute later: give the KV back, keep the generated tokens, go to the front of the queue. */
  #preempt(req: Request): void {
    this.#kv.release(req);
    this.#running = this.#running.filter((r) => r !== req);
    req.status = RequestStatus.WAITING;
    req.seqId = null;
    req.numComputedTokens = 0;
    req.samplerStarted = false;
    req.numPreemptions++;
    this.#numPreemptions++;
    this.#waiting.pushFront(req);
    this.#oldestWaitingMs = null;
  }

  /** `leader` has all but its last prompt token in KV: start its parked followers as forks of it (or on their own). */
  #forkFollowers(leader: Request, nowMs: number): void {
    const followers = this.#forks.takeReady(leader);
    if (followers === null) return;
    for (const f of followers) {
      const r = this.#running.length < this.#opts.maxRunning && !f.abortRequested ? this.#kv.fork(leader, f, leader.numComputedTokens) : null;
      if (r === null || !r.ok) {
        this.#waiting.push(f);
        this.#oldestWaitingMs = null;
        continue;
      }
      f.status = RequestStatus.RUNNING;
      f.seqId = r.seqId;
      f.numComputedTokens = r.numCachedTokens;
      f.samplerStarted = false;
      f.scheduledMs ??= nowMs;
      this.#running.push(f);
    }
  }

  #end(req: Request, reason: FinishReason, nowMs: number, message?: string): void {
    for (const f of this.#forks.release(req)) this.#waiting.push(f);
    this.#kv.release(req);
    this.#running = this.#running.filter((r) => r !== req);
    req.seqId = null;
    req.finish(reason, nowMs, message);
    this.#outputs.touch(req);
  }

  #dropAborted(nowMs: number): void {
    if (this.#numAbortsPending === 0) return; // cost guard: the O(queue) scan runs only when a client left
    this.#numAbortsPending = 0;
    for (const r of [...this.#waiting.removeWhere((x) => x.abortRequested), ...this.#forks.removeWhere((x) => x.abortRequested)]) {
      r.finish(r.endReason, nowMs);
      this.#outputs.touch(r);
    }
    this.#oldestWaitingMs = null;
    for (const r of this.#running.filter((x) => x.abortRequested)) this.#end(r, r.endReason, nowMs);
  }
}
