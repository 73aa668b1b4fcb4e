// Shared helpers for the llama runner tests: the tiny model (generated on first use, no download)
// and small plan builders.
import { ensureDefaultModel } from '../../../../src/model/default-model.ts';
import { LlamaRunner } from '../../../../src/engine/runner/llama/llama-runner.ts';
import type { LlamaRunnerOptions } from '../../../../src/engine/runner/llama/llama-runner.ts';
import { asSeqId } from '../../../../src/engine/plan.ts';
import type { RunnerPlan, StepItem } from '../../../../src/engine/plan.ts';

export const GREEDY = { temperature: 0, topP: 1, seed: 0 } as const;

export async function openTinyRunner(opts: Partial<LlamaRunnerOptions> = {}): Promise<LlamaRunner> {
  const modelPath = await ensureDefaultModel();
  return new LlamaRunner({ modelPath, threads: 2, maxSequences: 8, contextTokens: 4096, ...opts });
}

/** `tokens` appended to `seq` from `startPos`, sampling after the last one. */
export function item(seq: number, tokens: readonly number[], startPos: number, sample = true, resetSampler = false): StepItem {
  return { requestId: `r${seq}`, seqId: asSeqId(seq), tokens, startPos, sample, resetSampler, sampling: GREEDY };
}

/** One item per token, each sampled: the greedy next token after every position (teacher forcing). */
export function everyPosition(seq: number, tokens: readonly number[], startPos: number): StepItem[] {
  return tokens.map((t, i) => item(seq, [t], startPos + i, true));
}

export function plan(items: readonly StepItem[], kvOps: RunnerPlan['kvOps'] = []): RunnerPlan {
  return { kvOps, items };
}

/** Sampled tokens of a successful step; throws on a refused one. */
export async function run(runner: LlamaRunner, p: RunnerPlan): Promise<(number | null)[]> {
  const res = await runner.execute(p);
  if (!res.ok) throw new Error(`step refused: ${res.reason}: ${res.message}`);
  return [...res.sampled];
}

/** A deterministic prompt of about `n` tokens made of ordinary words. */
export function promptOf(runner: LlamaRunner, n: number): number[] {
  const words = 'the server keeps every request inside its latency budget and refuses the rest at once while the queue'.split(' ');
  let text = '';
  for (let i = 0; text.length < n * 8; i++) text += `${words[(i * 7) % words.length]} `;
  return runner.tokenizer.tokenize(text, true).slice(0, n);
}

export function agreement(a: readonly (number | null)[], b: readonly (number | null)[]): number {
  if (a.length !== b.length) throw new Error(`length mismatch ${a.length} vs ${b.length}`);
  let same = 0;
  for (let i = 0; i < a.length; i++) if (a[i] === b[i]) same++;
  return same / a.length;
}
