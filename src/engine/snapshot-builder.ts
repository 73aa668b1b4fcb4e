// Builds an EngineSnapshot from the requests the engine holds. Kept apart from snapshot.ts so the
// admission side can import the snapshot's shape without the engine's Request.

import type { Request } from './request.ts';
import { RequestStatus } from './request.ts';
import type { SchedulerSnapshot } from './scheduler/scheduler.ts';
import type { EngineSnapshot } from './snapshot.ts';

export interface SnapshotInputs {
  readonly numSteps: number;
  readonly atMs: number;
  readonly held: Iterable<{ readonly req: Request }>;
  readonly scheduler: SchedulerSnapshot;
  readonly avgStepMs: number | null;
  readonly longStepMs: number | null;
  readonly prefillTokensPerS: number | null;
  readonly decodeTokensPerS: number | null;
  readonly outputTokensP90: number | null;
  readonly stepMsByBatch: Float64Array | null;
  readonly recentDecodeBatch: number;
  /** Output tokens an output that has run `generated` will still run (OutputLengths.remaining); null: unknown. */
  readonly remainingTokens: (generated: number) => number | null;
}

export function buildSnapshot(i: SnapshotInputs): EngineSnapshot {
  let waitingPromptTokens = 0;
  let runningPromptTokens = 0;
  let remainingDecodeTokens = 0;
  const work: { deadlineMs: number; tokens: number }[] = [];
  const deadlines: number[] = [];
  for (const { req } of i.held) {
    // Everything not yet in KV, less the token that a decode step feeds.
    const toCompute = Math.max(0, req.numTokens - req.numComputedTokens - 1);
    if (req.status === RequestStatus.WAITING) waitingPromptTokens += toCompute;
    else if (req.status === RequestStatus.RUNNING) {
      runningPromptTokens += toCompute;
      const left = req.maxTokens - req.outputTokens.length;
      remainingDecodeTokens += left;
      deadlines.push(req.deadlineMs, Math.min(left, i.remainingTokens(req.outputTokens.length) ?? left));
    }
    if (toCompute > 0) work.push({ deadlineMs: req.deadlineMs, tokens: toCompute });
  }
  work.sort((a, b) => a.deadlineMs - b.deadlineMs);
  let sum = 0;
  const promptWorkByDeadline = work.map((w) => ({ deadlineMs: w.deadlineMs, cumulativeTokens: (sum += w.tokens) }));
  const s = i.scheduler;
  return Object.freeze({
    numSteps: i.numSteps,
    atMs: i.atMs,
    numWaiting: s.numWaiting,
    numRunning: s.numRunning,
    numFreeSeqIds: s.numFreeSeqIds,
    maxSequences: s.maxSequences,
    numBlocks: s.kv.numBlocks,
    numFreeBlocks: s.kv.numFreeBlocks,
    blockSize: s.kv.blockSize,
    waitingPromptTokens,
    runningPromptTokens,
    remainingDecodeTokens,
    promptWorkByDeadline,
    avgStepMs: i.avgStepMs,
    longStepMs: i.longStepMs,
    prefillTokensPerS: i.prefillTokensPerS,
    decodeTokensPerS: i.decodeTokensPerS,
    outputTokensP90: i.outputTokensP90,
    stepMsByBatch: i.stepMsByBatch,
    recentDecodeBatch: i.recentDecodeBatch,
    runningDeadlines: Float64Array.from(deadlines),
    scheduler: s,
  });
}
