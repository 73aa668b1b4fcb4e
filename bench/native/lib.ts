// Shared by the native benchmarks (batched-bench, chunk-cost, row-alignment): seeded random
// tokens, a greedy plan item, and a step that throws on refusal and returns the runner's timing.
import { asSeqId } from '../../src/engine/plan.ts';
import type { RunnerPlan, StepItem } from '../../src/engine/plan.ts';
import type { LlamaRunner, StepTiming } from '../../src/engine/runner/llama/llama-runner.ts';

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
