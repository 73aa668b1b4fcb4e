// The model runner interface: the one seam between the engine's bookkeeping and a model.
//
// Invariants:
// - A runner never touches queues or decides anything: it executes the plan it is handed, in
//   order (KV operations first, then one batched forward pass), and reports what it sampled.
// - `execute` is asynchronous and never blocks the event loop for the duration of a forward pass
//   (the llama runner runs llama_decode on a worker thread; the mock runner sleeps on a timer).
// - Expected conditions are values: a forward pass the backend refuses (no KV slot) resolves with
//   `{ ok: false }`, it does not throw. A throw is a bug.
// The plan and result types live in ../plan.ts; text ↔ tokens in ../tokenizer.ts.

import type { RunnerPlan, StepResult } from '../plan.ts';
import type { Tokenizer } from '../tokenizer.ts';

export interface RunnerInfo {
  /** Which runner is serving: `/stats` always says so. */
  readonly name: 'llama' | 'mock';
  /** Model name served under /v1/models. */
  readonly modelId: string;
  /** Total KV cells in the (unified) pool: the longest prompt + output any one sequence can have. */
  readonly contextTokens: number;
  /** Sequence ids available, 0..maxSequences-1. */
  readonly maxSequences: number;
  /** Token ids are in [0, vocabSize): a prompt of raw ids outside it is a 400, never a backend crash. */
  readonly vocabSize: number;
  /** Largest number of tokens one forward pass may carry. */
  readonly maxBatchTokens: number;
  /**
   * A step that mixes single rows (decoding sequences) with prompt chunks is computed as two calls,
   * the single rows apart (llama: step-layout.ts), so the scheduler aligns the prompt rows alone.
   * Absent: one call per step.
   */
  readonly decodeRowsApart?: boolean;
  /** Free-form facts (model path, threads, cost model) for /stats. */
  readonly details: Readonly<Record<string, unknown>>;
}

export interface Runner {
  readonly info: RunnerInfo;
  /** The model's tokenizer (shares the loaded model; usable without running a step). */
  readonly tokenizer: Tokenizer;
  execute(plan: RunnerPlan): Promise<StepResult>;
  /**
   * The engine has nothing to compute until a later execute() (its loop is going to sleep): a
   * runner may stop what it keeps busy between steps. Never called with a step in flight.
   */
  idle?(): void;
  close(): Promise<void>;
}
