// Shared by the native benchmarks (batched-bench, chunk-cost, row-alignment): seeded random
// tokens, a greedy plan item, and a step that throws on refusal and returns the runner's timing.
import { asSeqId } from '../../src/engine/plan.ts';
import type { RunnerPlan, StepItem } from '../../src/engine/plan.ts';
import { LlamaRunner } from '../../src/engine/runner/llama/llama-runner.ts';
import type { LlamaRunnerOptions, StepTiming } from '../../src/engine/runner/llama/llama-runner.ts';

/** `n` tokens in [1, vocab) from a fixed-seed LCG (llama-batched-bench uses rand() % n_vocab); reruns feed the same tokens. */
export function tokenSource(vocab: number, seed: number): (n: number) => number[] {
  let state = seed >>> 0;
  return (n) =>
    Array.from({ length: n }, () => {
      state = (state * 1103515245 + 12345) >>> 0;
      return 1 + (state % (vocab - 1));
    });
}

const GREEDY = { temperature: 0, topP: 1, seed: 0 };

/** A greedy item for sequence `seq`; its sampler is reset when it starts at position 0. */
export function benchItem(seq: number, tokens: number[], startPos: number, sample: boolean): StepItem {
  return { requestId: `bench${seq}`, seqId: asSeqId(seq), tokens, startPos, sample, resetSampler: startPos === 0, sampling: GREEDY };
}

/** Run one step; a refusal is an error (a benchmark plans only what fits). */
export async function step(runner: LlamaRunner, plan: RunnerPlan): Promise<StepTiming> {
  const res = await runner.execute(plan);
  if (!res.ok) throw new Error(`${res.reason}: ${res.message}`);
  return runner.lastTiming!;
}

/** A native benchmark's command line: an optional model path first, then `--name value` pairs. */
export interface BenchArgs {
  /** The value after `name`, else `dflt`. */
  readonly opt: (name: string, dflt: string) => string;
  /** A comma-separated list of numbers. */
  readonly list: (name: string, dflt: string) => number[];
  /** The model path given first, if any (else the caller's default). */
  readonly modelPath: string | undefined;
}

export function benchArgs(args: readonly string[]): BenchArgs {
  const opt = (name: string, dflt: string): string => {
    const i = args.indexOf(name);
    return i >= 0 ? args[i + 1]! : dflt;
  };
  return {
    opt,
    list: (name, dflt) => opt(name, dflt).split(',').map(Number),
    modelPath: args[0] !== undefined && !args[0].startsWith('--') ? args[0] : undefined,
  };
}

/** The chunk benchmarks' runner: four sequences, a 16,384-cell pool, batches up to `maxChunk` + 1 rows. */
export function chunkBenchRunner(modelPath: string, threads: number, maxChunk: number, more: Partial<LlamaRunnerOptions> = {}): LlamaRunner {
  const batch = Math.max(512, maxChunk + 1);
  return new LlamaRunner({ modelPath, threads, maxSequences: 4, maxBatchTokens: batch, microBatchTokens: batch, contextTokens: 16384, contextBeyondTrained: true, ...more });
}

/** Fills a sequence with `n` tokens from position 0, in steps of at most 512 (through `exec`). */
export function prefiller(exec: (p: RunnerPlan) => Promise<number>, rand: (n: number) => number[]): (seq: number, n: number) => Promise<void> {
  return async (seq, n) => {
    const toks = rand(n);
    for (let at = 0; at < n; at += 512) await exec({ kvOps: [], items: [benchItem(seq, toks.slice(at, at + 512), at, at + 512 >= n)] });
  };
}
