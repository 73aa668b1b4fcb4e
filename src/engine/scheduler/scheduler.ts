// What every scheduler (fifo, static, continuous) promises the engine.
//
// Decide → execute → apply: `schedule(now)` returns a plan (plain data; it may reserve KV
// bookkeeping but never runs the model), the engine hands `plan.runner` to the runner, and
// `update(plan, result, now)` applies what came back and returns what each request gained (outputs
// as data). Only the scheduler moves requests between its queues and finishes them; it never
// reads a clock (time comes in as `nowMs`).

import type { StepBudget } from './step-cost.ts';
import type { EndRequest, Request } from '../request.ts';
import type { RequestOutput } from '../outputs.ts';
import type { RunnerPlan, StepResult } from '../plan.ts';

export interface ScheduledItem {
  /** The request this runner item belongs to (same index as in `runner.items`). */
  readonly request: Request;
  /** Tokens fed to it this step. */
  readonly numNewTokens: number;
}

export interface SchedulerPlan {
  /** What the runner executes: KV operations, then one batch. Empty items with kvOps is valid. */
  readonly runner: RunnerPlan;
  /** One entry per `runner.items` entry. */
  readonly scheduled: readonly ScheduledItem[];
  /** Nothing to run now but there is work: re-schedule at this time (static batching's fill timeout). */
  readonly wakeAtMs: number | null;
  /** Requests that ended while the step was planned (their client left, or a stop string matched). */
  readonly outputs: readonly RequestOutput[];
}

export const emptySchedulerPlan = (wakeAtMs: number | null = null): SchedulerPlan => ({
  runner: { kvOps: [], items: [] },
  scheduled: [],
  wakeAtMs,
  outputs: [],
});

/** KV facts for /stats and metrics; null fields where a scheduler has no such notion. */
export interface KvSnapshot {
  readonly mode: 'paged' | 'contiguous' | 'none';
  readonly numBlocks: number;
  readonly numFreeBlocks: number;
  readonly blockSize: number;
  /** Fraction of blocks in use, 0..1. */
  readonly usage: number;
  /** Free blocks no waiting request can use (contiguous) or partially filled tail waste (paged), 0..1. */
  readonly fragmentation: number;
  readonly prefixCache: {
    readonly enabled: boolean;
    readonly queryTokens: number;
    /** Prompt tokens found: in the pool, or (counted in `host` as well) placed back from the host tier. */
    readonly hitTokens: number;
    readonly numNodes: number;
    /** Blocks a request computed although the cache held them (another computed the same prefix at the same time), swapped for the cache's copies once it inserted. */
    readonly adoptedBlocks: number;
    /** The host tier (null: off). */
    readonly host?: { readonly numEntries: number; readonly numTokens: number; readonly capacityTokens: number; readonly numSaves: number; readonly numLoads: number; readonly hitTokens: number } | null;
  } | null;
  readonly numCopyOnWrite: number;
}

/**
 * Why the scheduler stopped starting waiting requests in its last step (SGLang's AddReqResult):
 * the admission controller and the metrics read it instead of guessing.
 * - none_waiting: nothing was waiting;
 * - budget: the step's token (or prompt-token) budget ran out;
 * - no_seq_id: no llama.cpp sequence id was free (the cache gave back what it could);
 * - no_blocks: the head request's whole prompt did not fit beside the running requests and the watermark;
 * - max_running: the running set is full;
 * - static_batch_running: static batching runs a batch to completion before starting another;
 * - static_filling: static batching is waiting for a batch to fill (or its timeout).
 */
export type StopReason = 'none_waiting' | 'budget' | 'no_seq_id' | 'no_blocks' | 'max_running' | 'static_batch_running' | 'static_filling';

export interface SchedulerSnapshot {
  readonly name: string;
  readonly numWaiting: number;
  readonly numRunning: number;
  readonly numFreeSeqIds: number;
  readonly maxSequences: number;
  readonly numPreemptions: number;
  readonly kv: KvSnapshot;
  /** Why the last step stopped starting waiting requests. */
  readonly stopReason: StopReason;
  /** Blocks held by running requests ahead of their computed tokens (the rest of their prompts); cells for contiguous KV. */
  readonly numReservedBlocks: number;
  /** Free blocks now (cells for contiguous KV; 0 where there is no KV accounting). */
  readonly numFreeBlocks: number;
}

export interface Scheduler {
  readonly name: 'fifo' | 'static' | 'continuous';
  /** Take a new request into the wait queue. */
  add(req: Request): void;
  /** The front end ended it (client left, stop string): it is finished (and its KV freed) before the next batch. */
  abort(req: Request, reason?: EndRequest): void;
  schedule(nowMs: number): SchedulerPlan;
  /** Apply a step's result; returns, per request touched, the tokens it gained and whether it ended. */
  update(plan: SchedulerPlan, result: StepResult, nowMs: number): RequestOutput[];
  /** Prompt tokens the prefix cache holds now, with no side effect (0 without a cache). For admission control. */
  peekCachedTokens(promptTokens: readonly number[]): number;
  /** Requests not yet finished (waiting or running). */
  readonly numUnfinished: number;
  snapshot(): SchedulerSnapshot;
  /** Full consistency check for tests (KV, sequence ids, queues); throws on a broken invariant. */
  checkInvariants(): void;
  /** The step-time budget, where the policy has one (continuous, decode-first). */
  readonly stepBudget?: StepBudget | null;
}
