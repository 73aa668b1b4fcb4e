// Builds the scheduler named by configuration, with its KV accounting sized from the runner.

import type { RunnerInfo } from '../runner/runner.ts';
import { BatchScheduler } from './batch-scheduler.ts';
import { FifoScheduler } from './fifo.ts';
import type { Scheduler } from './scheduler.ts';
import { WaitQueue } from './wait-queue.ts';

/**
 * Prompt tokens per step by default. On this class of machine (2 cores) a 512-token step of the
 * small model takes ~0.7 s and, with prefill-first, stalled every stream for seconds
 * (docs/benchmarks.md); 256 keeps a step near 0.35 s there. Calibrate per model: --prefill-chunk.
 */
export const DEFAULT_PREFILL_CHUNK_TOKENS = 256;

export type SchedulerName = 'fifo' | 'static' | 'continuous';

export interface SchedulerConfig {
  readonly scheduler: SchedulerName;
  /** KV accounting: paged blocks (default) or one contiguous slab per request (the ablation baseline). */
  readonly kv?: 'paged' | 'contiguous';
  /** Radix prefix cache (paged only; default on for paged). */
  readonly prefixCache?: boolean;
  readonly blockSize?: number;
  /** Most requests running at once (default: every sequence id). */
  readonly maxRunning?: number;
  /** Most prompt tokens per step, all requests together (default 256, at most the step budget). */
  readonly prefillChunkTokens?: number;
  readonly priority?: 'prefill-first' | 'decode-first';
  readonly staticBatchSize?: number;
  readonly staticWaitMs?: number;
  /** The server-wide output cap (the contiguous allocator reserves it per request). */
  readonly maxOutputTokens?: number;
  /** Most of the pool unreferenced cached prefixes may keep (0..1], default 1. */
  readonly cacheMaxFraction?: number;
  /** What the prefix cache keeps of a computed prompt: 'seen' (default: the part an earlier prompt had) or 'all'. */
  readonly cacheRetain?: 'all' | 'seen';
  /** Tokens the prefix cache's host tier keeps in host memory (kv/host-tier.ts); 0 or absent: off. */
  readonly hostTierTokens?: number;
  /** Share of the pool a new request must leave free for running requests' decode growth (paged; default 0.01). */
  readonly kvWatermark?: number;
  /** Preemptions after which a request is not preempted again (default 2). */
  readonly maxPreemptions?: number;
  /**
   * Step-time budget for prompt chunks (continuous, decode-first; step-cost.ts): 'off' (default)
   * caps every step at prefillChunkTokens; 'auto' sizes the chunk beside decode rows to add at
   * most twice what a prefillChunkTokens chunk adds at the start of a prompt, and lets a step with
   * no decode rows take the whole batch; a number of ms fixes that target. Off by default: a tight
   * target holds streams' ITL through a long prompt at the price of that prompt's own prefill
   * (docs/per-token.md §13).
   */
  readonly stepTarget?: number | 'auto' | 'off';
  /**
   * Smallest prompt chunk the step-time budget gives beside decode rows while a prompt waits
   * (default 64; with a tight stepTarget, 1 lets a deep chunk shrink to what the target allows).
   */
  readonly stepMinChunkTokens?: number;
}

export function createScheduler(config: SchedulerConfig, runner: RunnerInfo): Scheduler {
  if (config.scheduler === 'fifo') return new FifoScheduler({ maxBatchTokens: runner.maxBatchTokens, queue: new WaitQueue() });
  if (config.scheduler !== 'static' && config.scheduler !== 'continuous') throw new Error(`unknown scheduler '${String(config.scheduler)}'; expected fifo, static or continuous`);
  const kv = config.kv ?? 'paged';
  return new BatchScheduler({
    policy: config.scheduler,
    maxBatchTokens: runner.maxBatchTokens,
    maxRunning: config.maxRunning ?? runner.maxSequences,
    prefillChunkTokens: Math.min(config.prefillChunkTokens ?? DEFAULT_PREFILL_CHUNK_TOKENS, runner.maxBatchTokens),
    alignPromptRowsAlone: runner.decodeRowsApart === true,
    priority: config.priority ?? 'decode-first',
    staticBatchSize: config.staticBatchSize ?? Math.min(8, runner.maxSequences),
    staticWaitMs: config.staticWaitMs ?? 50,
    queue: new WaitQueue(),
    ...(config.maxPreemptions === undefined ? {} : { maxPreemptions: config.maxPreemptions }),
    stepBudget: stepBudgetOptions(config.stepTarget ?? 'off', config.stepMinChunkTokens),
    kv: {
      mode: kv,
      prefixCache: kv === 'paged' && (config.prefixCache ?? true),
      numCells: runner.contextTokens,
      blockSize: config.blockSize ?? 16,
      maxSequences: runner.maxSequences,
      maxOutputTokens: config.maxOutputTokens ?? 1024,
      ...(config.cacheMaxFraction === undefined ? {} : { cacheMaxFraction: config.cacheMaxFraction }),
      ...(config.cacheRetain === undefined ? {} : { cacheRetain: config.cacheRetain }),
      ...(config.hostTierTokens === undefined ? {} : { hostTierTokens: config.hostTierTokens }),
      ...(config.kvWatermark === undefined ? {} : { watermarkFraction: config.kvWatermark }),
    },
  });
}

function stepBudgetOptions(target: number | 'auto' | 'off', minChunk: number | undefined): { targetMs?: number; minChunkTokens?: number; sizeChunks: boolean } {
  if (minChunk !== undefined && !(Number.isInteger(minChunk) && minChunk >= 1)) throw new Error(`stepMinChunkTokens: expected a whole number >= 1, got ${String(minChunk)}`);
  const floor = minChunk === undefined ? {} : { minChunkTokens: minChunk };
  // 'off' still fits the cost model: it is what the slow-step warning compares against.
  if (target === 'off') return { sizeChunks: false };
  if (target === 'auto') return { ...floor, sizeChunks: true };
  if (!(target > 0)) throw new Error(`stepTarget: expected a positive number of ms, 'auto' or 'off', got ${String(target)}`);
  return { targetMs: target, ...floor, sizeChunks: true };
}
