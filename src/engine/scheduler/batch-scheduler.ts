// Batching schedulers: `continuous` (iteration-level, rungs 3–4 of the ablation ladder) and
// `static` (rung 2: fill a batch, run it to completion, no late joins). Both share the KV
// protocol (kv-manager.ts) and one rule for prefill and decode: each step gives every scheduled
// request min(numTokens − numComputedTokens, what is left of the budget) tokens, so chunked
// prefill, prefix hits and decode need no special case.
//
// Each continuous step:
//   1. drop requests whose client left (cost guard: only when an abort is pending);
//   2. running requests in deadline order get their next tokens (decode or the next prefill
//      chunk), under the per-step token budget and the free blocks — when blocks run out the
//      running request with the latest deadline is preempted (recompute) to the front of the queue;
//   3. waiting requests are admitted in EDF order while the budget, sequence ids and blocks last.
// Prompt tokens in one step are capped by `prefillChunkTokens` (all requests together), which is
// what bounds a step's time and so the inter-token latency of everyone decoding.
// `decode-first` (default) gives every decoding request its token before any prompt chunk;
// `prefill-first` gives prompt chunks and admissions the budget first — measured to stall every
// stream for seconds while prompts queue (docs/benchmarks.md, results/peer/rate-0.6/headroom-r4).

import type { Request } from '../request.ts';
import { RequestStatus } from '../request.ts';
import type { EndRequest, FinishReason } from '../request.ts';
import { OutputCollector } from '../outputs.ts';
import type { RequestOutput } from '../outputs.ts';
import type { StepItem, StepResult } from '../plan.ts';
import { KvManager } from './kv-manager.ts';
import type { KvManagerOptions } from './kv-manager.ts';
import type { ScheduledItem, Scheduler, SchedulerPlan, SchedulerSnapshot } from './scheduler.ts';
import { emptySchedulerPlan } from './scheduler.ts';
import { WaitQueue } from './wait-queue.ts';

export interface BatchSchedulerOptions {
  readonly policy: 'continuous' | 'static';
  /** Most tokens in one forward pass (the chunked-prefill budget). */
  readonly maxBatchTokens: number;
  /** Most requests running at once (≤ sequence ids). */
  readonly maxRunning: number;
  /** Most prompt tokens in one step, all requests together (≤ maxBatchTokens). */
  readonly prefillChunkTokens: number;
  readonly priority: 'prefill-first' | 'decode-first';
  /** static: start a batch once this many are waiting ... */
  readonly staticBatchSize: number;
  /** ... or once the oldest waiting request has waited this long, ms. */
  readonly staticWaitMs: number;
  readonly kv: KvManagerOptions;
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
  readonly #waiting = new WaitQueue();
  /** Running requests, in admission order. */
  #running: Request[] = [];
  #numAbortsPending = 0;
  /** Static batching: the oldest arrival in the wait queue, or null when it must be recomputed. */
  #oldestWaitingMs: number | null = null;
  #numPreemptions = 0;
  #numRunnerRefusals = 0;
  readonly #outputs = new OutputCollector();

  constructor(opts: BatchSchedulerOptions) {
    const ints: (keyof BatchSchedulerOptions)[] = ['maxBatchTokens', 'maxRunning', 'prefillChunkTokens', 'staticBatchSize'];
    for (const k of ints) {
      const v = opts[k];
      if (typeof v !== 'number' || !Number.isInteger(v) || v < 1) throw new Error(`BatchScheduler: expected ${k} to be a positive integer, got ${JSON.stringify(v)}`);
    }
    if (opts.maxRunning > opts.kv.maxSequences) throw new Error(`BatchScheduler: expected maxRunning ≤ ${opts.kv.maxSequences} sequence ids, got ${opts.maxRunning}`);
    this.name = opts.policy;
    this.#opts = opts;
    this.#kv = new KvManager(opts.kv);
  }

  get numUnfinished(): number {
    return this.#waiting.size + this.#running.length;
  }

  /** Times llama.cpp refused a batch the accounting admitted (must stay 0). */
  get numRunnerRefusals(): number {
    return this.#numRunnerRefusals;
  }

  add(req: Request): void {
    if (req.abortRequested) this.#numAbortsPending++;
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
    const scheduled: ScheduledItem[] = [];
    let wakeAtMs: number | null = null;
    if (this.#opts.policy === 'static') {
      if (this.#running.length === 0) {
        const fill = this.#staticReady(nowMs);
        // The whole batch is admitted now (prompts beyond this step's budget get their tokens in later steps).
        if (fill === true) this.#admit(budget, scheduled, Math.min(this.#opts.staticBatchSize, this.#opts.maxRunning), nowMs, true);
        else wakeAtMs = fill;
      }
      this.#continueRunning(budget, scheduled);
    } else if (this.#opts.priority === 'prefill-first') {
      this.#continueRunning(budget, scheduled, 'prefill');
      this.#admit(budget, scheduled, this.#opts.maxRunning, nowMs);
      this.#continueRunning(budget, scheduled, 'decode');
    } else {
      this.#continueRunning(budget, scheduled, 'decode');
      this.#continueRunning(budget, scheduled, 'prefill');
      this.#admit(budget, scheduled, this.#opts.maxRunning, nowMs);
    }
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
    }));
    return { runner: { kvOps, items }, scheduled, wakeAtMs: null, outputs };
  }

  update(plan: SchedulerPlan, result: StepResult, nowMs: number): RequestOutput[] {
    if (!result.ok) {
      const live = plan.scheduled.map((s) => s.request).filter((r) => r.status === RequestStatus.RUNNING);
      if (result.reason === 'no_kv_slot') {
        // The accounting admitted a batch the runner refused: recover by recomputing (and count it: it must stay 0).
        this.#numRunnerRefusals++;
        for (const r of live) this.#preempt(r);
      } else {
        for (const r of live) this.#end(r, 'error', nowMs, `the model runner failed: ${result.message}`);
      }
      return this.#outputs.take();
    }
    plan.scheduled.forEach(({ request: req, numNewTokens }, i) => {
      if (req.status !== RequestStatus.RUNNING) return;
      req.numComputedTokens += numNewTokens;
      req.samplerStarted = true;
      // Caught up with every token it had: its prefix goes into the cache now, before the sampled token extends it.
      this.#kv.onComputed(req);
      const token = result.sampled[i];
      if (token == null) return;
      const reason = req.appendToken(token, nowMs);
      this.#outputs.touch(req);
      if (reason !== null) this.#end(req, reason, nowMs);
    });
    return this.#outputs.take();
  }

  peekCachedTokens(): number {
    return 0; // wired to the prefix cache's pure peek with the KV manager split
  }

  snapshot(): SchedulerSnapshot {
    return {
      name: this.name,
      numWaiting: this.#waiting.size,
      numRunning: this.#running.length,
      numFreeSeqIds: this.#kv.numFreeSeqIds,
      maxSequences: this.#opts.kv.maxSequences,
      numPreemptions: this.#numPreemptions,
      kv: this.#kv.snapshot(this.#running),
    };
  }

  checkInvariants(): void {
    for (const r of this.#running) {
      if (r.status !== RequestStatus.RUNNING || r.seqId === null) throw new Error(`bug: running request ${r.id} in status ${r.status}`);
    }
    for (const r of this.#waiting) if (r.status !== RequestStatus.WAITING) throw new Error(`bug: waiting request ${r.id} in status ${r.status}`);
    this.#kv.checkInvariants();
  }

  /** Static batching: true when a batch should start now, else the time to look again (null: wait for arrivals). */
  #staticReady(nowMs: number): true | number | null {
    if (this.#waiting.size === 0) return null;
    if (this.#waiting.size >= this.#opts.staticBatchSize) return true;
    // Cost guard: the O(queue) scan for the oldest arrival runs once per change of the queue's
    // membership by admission or preemption, not on every idle wake-up.
    if (this.#oldestWaitingMs === null) {
      let oldest = Infinity;
      for (const r of this.#waiting) oldest = Math.min(oldest, r.arrivalMs);
      this.#oldestWaitingMs = oldest;
    }
    const due = this.#oldestWaitingMs + this.#opts.staticWaitMs;
    return nowMs >= due ? true : due;
  }

  /** Give running requests their next tokens, earliest deadline first; preempt the latest deadline when blocks run out. */
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
      const n = isDecode ? 1 : Math.min(remaining, budget.tokens, budget.prefillTokens);
      if (n === 0) continue;
      while (!this.#kv.grow(req, n)) {
        const victim = this.#latestDeadline(taken);
        if (victim === undefined) return;
        this.#preempt(victim);
        if (victim === req) break;
      }
      if (req.status !== RequestStatus.RUNNING) continue;
      scheduled.push({ request: req, numNewTokens: n });
      taken.add(req);
      budget.tokens -= n;
      if (!isDecode) budget.prefillTokens -= n;
    }
  }

  #admit(budget: Budget, scheduled: ScheduledItem[], maxRunning: number, nowMs: number, wholeBatch = false): void {
    while ((Math.min(budget.tokens, budget.prefillTokens) > 0 || wholeBatch) && this.#running.length < maxRunning) {
      const req = this.#waiting.peek();
      if (req === undefined) return;
      const r = this.#kv.admit(req, Math.min(budget.tokens, budget.prefillTokens));
      if (!r.ok) return; // head-of-line: EDF order is kept; the next step tries again
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
      budget.tokens -= r.numNewTokens;
      budget.prefillTokens -= r.numNewTokens;
    }
  }

  #latestDeadline(exclude: ReadonlySet<Request>): Request | undefined {
    let victim: Request | undefined;
    for (const r of this.#running) {
      if (exclude.has(r)) continue;
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

  #end(req: Request, reason: FinishReason, nowMs: number, message?: string): void {
    this.#kv.release(req);
    this.#running = this.#running.filter((r) => r !== req);
    req.seqId = null;
    req.finish(reason, nowMs, message);
    this.#outputs.touch(req);
  }

  #dropAborted(nowMs: number): void {
    if (this.#numAbortsPending === 0) return; // cost guard: the O(queue) scan runs only when a client left
    this.#numAbortsPending = 0;
    for (const r of this.#waiting.removeWhere((x) => x.abortRequested)) {
      r.finish(r.endReason, nowMs);
      this.#outputs.touch(r);
    }
    this.#oldestWaitingMs = null;
    for (const r of this.#running.filter((x) => x.abortRequested)) this.#end(r, r.endReason, nowMs);
  }
}
