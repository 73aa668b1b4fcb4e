// FIFO: one request at a time, start to finish (rung 1 of the ablation ladder). The wait queue is
// still earliest-deadline-first; "FIFO" names the absence of batching. The prompt is fed in
// chunks of at most `maxBatchTokens`, then one token per step. Sequence 0 is the only sequence.

import type { Request } from '../request.ts';
import { RequestStatus, samplerHistory } from '../request.ts';
import type { EndRequest, FinishReason } from '../request.ts';
import { OutputCollector } from '../outputs.ts';
import type { RequestOutput } from '../outputs.ts';
import type { KvOp, StepItem, StepResult } from '../plan.ts';
import { asSeqId } from '../plan.ts';
import type { Scheduler, SchedulerPlan, SchedulerSnapshot } from './scheduler.ts';
import { emptySchedulerPlan } from './scheduler.ts';
import type { RequestQueue } from './request-queue.ts';
import { bug } from '../../util/bug.ts';

const SEQ = asSeqId(0);

export interface FifoOptions {
  readonly maxBatchTokens: number;
  /** The wait queue (the factory passes an EDF WaitQueue). */
  readonly queue: RequestQueue;
}

export class FifoScheduler implements Scheduler {
  readonly name = 'fifo' as const;
  readonly #opts: FifoOptions;
  readonly #waiting: RequestQueue;
  #running: Request | null = null;
  #pendingKvOps: KvOp[] = [];
  readonly #outputs = new OutputCollector();

  constructor(opts: FifoOptions) {
    if (!(opts.maxBatchTokens >= 1)) throw new Error(`FifoScheduler: expected maxBatchTokens ≥ 1, got ${opts.maxBatchTokens}`);
    this.#opts = opts;
    this.#waiting = opts.queue;
  }

  get numUnfinished(): number {
    return this.#waiting.size + (this.#running === null ? 0 : 1);
  }

  add(req: Request): void {
    this.#waiting.push(req);
  }

  abort(req: Request, reason: EndRequest = 'abort'): void {
    req.requestAbort(reason);
  }

  schedule(nowMs: number): SchedulerPlan {
    for (const r of this.#waiting.removeWhere((x) => x.abortRequested)) {
      r.finish(r.endReason, nowMs);
      this.#outputs.touch(r);
    }
    if (this.#running?.abortRequested === true) this.#end(this.#running, this.#running.endReason, nowMs);
    if (this.#running === null) {
      const next = this.#waiting.pop();
      if (next !== undefined) {
        next.status = RequestStatus.RUNNING;
        next.seqId = SEQ;
        next.numComputedTokens = 0;
        next.samplerStarted = false;
        next.scheduledMs ??= nowMs;
        this.#running = next;
      }
    }
    const kvOps = this.#pendingKvOps;
    this.#pendingKvOps = [];
    const req = this.#running;
    const outputs = this.#outputs.take();
    if (req === null) return { ...emptySchedulerPlan(), runner: { kvOps, items: [] }, outputs };
    const from = req.numComputedTokens;
    const n = Math.min(req.numTokens - from, this.#opts.maxBatchTokens);
    const item: StepItem = {
      requestId: req.id,
      seqId: SEQ,
      tokens: req.tokensIn(from, from + n),
      startPos: from,
      sample: from + n === req.numTokens,
      resetSampler: !req.samplerStarted,
      sampling: req.sampling,
      ...samplerHistory(req),
    };
    return { runner: { kvOps, items: [item] }, scheduled: [{ request: req, numNewTokens: n }], wakeAtMs: null, outputs };
  }

  update(plan: SchedulerPlan, result: StepResult, nowMs: number): RequestOutput[] {
    plan.scheduled.forEach(({ request: req, numNewTokens }, i) => {
      if (req !== this.#running) return; // already ended (cannot happen in FIFO, kept for symmetry)
      if (!result.ok) {
        this.#end(req, 'error', nowMs, `the model runner failed: ${result.message}`);
        return;
      }
      req.numComputedTokens += numNewTokens;
      req.samplerStarted = true;
      const token = result.sampled[i];
      if (token === null || token === undefined) return;
      const reason = req.appendToken(token, nowMs, result.logprobs?.[i] ?? null);
      this.#outputs.touch(req);
      if (reason !== null) this.#end(req, reason, nowMs);
    });
    return this.#outputs.take();
  }

  peekCachedTokens(): number {
    return 0; // FIFO keeps no prefix cache
  }

  snapshot(): SchedulerSnapshot {
    return {
      name: this.name,
      numWaiting: this.#waiting.size,
      numRunning: this.#running === null ? 0 : 1,
      numFreeSeqIds: this.#running === null ? 1 : 0,
      maxSequences: 1,
      numPreemptions: 0,
      kv: { mode: 'none', numBlocks: 0, numFreeBlocks: 0, blockSize: 0, usage: 0, fragmentation: 0, prefixCache: null, numCopyOnWrite: 0 },
      stopReason: this.#waiting.size === 0 ? 'none_waiting' : 'max_running',
      numReservedBlocks: 0,
      numFreeBlocks: 0,
    };
  }

  checkInvariants(): void {
    if (this.#running !== null && this.#running.status !== RequestStatus.RUNNING) {
      bug(`FIFO running slot holds request ${this.#running.id} in status ${this.#running.status}`);
    }
  }

  #end(req: Request, reason: FinishReason, nowMs: number, message?: string): void {
    req.finish(reason, nowMs, message);
    this.#outputs.touch(req);
    req.seqId = null;
    this.#running = null;
    this.#pendingKvOps.push({ kind: 'remove', seqId: SEQ, p0: 0, p1: -1 });
  }
}
