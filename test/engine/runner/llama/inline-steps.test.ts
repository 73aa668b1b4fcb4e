// inlineStepMs: a step whose size lately ran that fast runs on the JS thread (decodeSync) instead of
// a libuv pool thread. The tokens must not depend on the thread: the same greedy and seeded
// generations come out either way, inline steps report no hand-off, a size never measured and a
// step of more rows than sequences go to the pool, and 0 never runs inline.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { asSeqId } from '../../../../src/engine/plan.ts';
import type { SamplingParams, StepItem } from '../../../../src/engine/plan.ts';
import type { LlamaRunner } from '../../../../src/engine/runner/llama/llama-runner.ts';
import { openTinyRunner, plan, promptOf } from './fixture.ts';

const SEEDED: SamplingParams = { temperature: 0.9, topP: 0.95, seed: 7 };
const GREEDY: SamplingParams = { temperature: 0, topP: 1, seed: 0 };

function rowItem(seq: number, tokens: readonly number[], startPos: number, resetSampler: boolean, sampling: SamplingParams): StepItem {
  return { requestId: `r${seq}`, seqId: asSeqId(seq), tokens, startPos, sample: true, resetSampler, sampling };
}

interface Generation {
  readonly tokens: number[][];
  /** Per step: [rows, ran inline]. */
  readonly steps: [number, boolean][];
}

/** Two sequences (one greedy, one seeded): one prefill step of both prompts, then `n` decode steps of both. */
async function generate(runner: LlamaRunner, n: number): Promise<Generation> {
  const prompts = [promptOf(runner, 40), promptOf(runner, 24)];
  const samplings = [GREEDY, SEEDED];
  const steps: [number, boolean][] = [];
  const step = async (items: StepItem[]): Promise<number[]> => {
    const res = await runner.execute(plan(items));
    if (!res.ok) throw new Error(`step refused: ${res.reason}`);
    steps.push([items.reduce((k, it) => k + it.tokens.length, 0), runner.lastTiming!.inline]);
    return res.sampled.map((t) => t!);
  };
  let last = await step(prompts.map((p, s) => rowItem(s, p, 0, true, samplings[s]!)));
  const tokens = last.map((t) => [t]);
  for (let i = 0; i < n; i++) {
    last = await step(last.map((t, s) => rowItem(s, [t], prompts[s]!.length + i, false, samplings[s]!)));
    last.forEach((t, s) => tokens[s]!.push(t));
  }
  return { tokens, steps };
}

test('steps on the JS thread give the same tokens as steps on a pool thread, greedy and seeded', async () => {
  const pooled = await openTinyRunner({ maxSequences: 4 });
  let onPool: Generation;
  try {
    onPool = await generate(pooled, 30);
  } finally {
    await pooled.close();
  }
  assert.ok(onPool.steps.every(([, inline]) => !inline), 'inlineStepMs 0 (the default) ran a step inline');

  const inlined = await openTinyRunner({ maxSequences: 4, inlineStepMs: 60_000 });
  let inline: Generation;
  try {
    inline = await generate(inlined, 30);
    assert.equal(inlined.lastTiming!.queueUs < 50 && inlined.lastTiming!.returnUs === 0, true, `an inline step reported hand-offs: ${JSON.stringify(inlined.lastTiming)}`);
  } finally {
    await inlined.close();
  }
  assert.deepEqual(inline.tokens, onPool.tokens);
  const [prefill, firstDecode, ...rest] = inline.steps;
  assert.deepEqual(prefill, [64, false], 'a step of more rows than sequences runs on the pool');
  assert.deepEqual(firstDecode, [2, false], 'a step size never measured runs on the pool first');
  assert.ok(rest.every(([rows, on]) => rows === 2 && on), `later decode steps ran inline: ${JSON.stringify(rest)}`);
});

test('a step size that ran slower than inlineStepMs stays on the pool', async () => {
  const runner = await openTinyRunner({ maxSequences: 4, inlineStepMs: 0.001 });
  try {
    const { steps } = await generate(runner, 10);
    assert.ok(steps.every(([, inline]) => !inline), `a step slower than 1 µs ran inline: ${JSON.stringify(steps)}`);
  } finally {
    await runner.close();
  }
});
