// Batching and chunking must not change what the model computes.
//
// Why ≥ 99% top-token agreement and not exact equality: llama.cpp's CPU kernels take different
// paths for different batch shapes (how rows are split across threads, when activations are
// converted to the weights' dot-product type, the order of partial sums), and float addition is
// not associative, so the same position's logits can differ in the last bits between a batch of
// one and a batch of many. A random-weight model has nearly flat logits, so now and then the top
// two are within that noise and the argmax flips. The comparison is teacher-forced (both sides
// are fed the same tokens and the greedy choice is compared at every position), so one flip costs
// one position instead of derailing the rest of a free-running continuation. A real bug (wrong
// positions, wrong sequence ids, a row attending to another sequence) breaks far more than 1%.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { LlamaRunner } from '../../../../src/engine/runner/llama/llama-runner.ts';
import { agreement, everyPosition, item, openTinyRunner, plan, promptOf, run } from './fixture.ts';

let runner: LlamaRunner;
before(async () => {
  runner = await openTinyRunner();
});
after(async () => {
  await runner.close();
});

const clear = (...seqs: number[]) => seqs.map((s) => ({ kind: 'remove' as const, seqId: s as never, p0: 0, p1: -1 }));

test('two sequences decoded in one batch give the same greedy tokens as each decoded alone', async (t) => {
  const a = promptOf(runner, 120);
  const b = runner.tokenizer.tokenize('A different prompt: 12 cats, 7 dogs, and one very long sentence about the sea and the moon.', true);
  // Alone: every position of A, then of B, each in its own forward pass.
  const aloneA = await run(runner, plan(everyPosition(0, a, 0), clear(0, 1)));
  const aloneB = await run(runner, plan(everyPosition(1, b, 0), clear(0, 1)));
  // Together: both prompts in one forward pass.
  const both = await run(runner, plan([...everyPosition(0, a, 0), ...everyPosition(1, b, 0)], clear(0, 1)));
  const togetherA = both.slice(0, a.length);
  const togetherB = both.slice(a.length);

  // Then 16 decode steps: alone (one sequence per pass) vs together (both in every pass), teacher-forced.
  const feedA = aloneA.slice(-1).concat(a.slice(0, 15)) as number[];
  const feedB = aloneB.slice(-1).concat(b.slice(0, 15)) as number[];
  const decAlone: (number | null)[] = [];
  const decTogether: (number | null)[] = [];
  for (let i = 0; i < 16; i++) {
    decAlone.push(...(await run(runner, plan([item(0, [feedA[i]!], a.length + i)]))));
    decAlone.push(...(await run(runner, plan([item(1, [feedB[i]!], b.length + i)]))));
  }
  await run(runner, plan([], clear(0, 1)));
  await run(runner, plan([item(0, a, 0, false), item(1, b, 0, false)]));
  for (let i = 0; i < 16; i++) {
    decTogether.push(...(await run(runner, plan([item(0, [feedA[i]!], a.length + i), item(1, [feedB[i]!], b.length + i)]))));
  }

  const score = agreement([...aloneA, ...aloneB, ...decAlone], [...togetherA, ...togetherB, ...decTogether]);
  t.diagnostic(`batched vs alone agreement ${score.toFixed(4)} over ${aloneA.length + aloneB.length + decAlone.length} positions`);
  assert.ok(score >= 0.99, `batched vs alone top-token agreement ${score.toFixed(4)} < 0.99`);
  // Guard against a vacuous pass: the model must not say the same thing everywhere.
  assert.ok(new Set(aloneA).size > 5, 'the model produced almost constant output; the comparison would be vacuous');
});

test('a prompt prefilled in chunks matches it prefilled whole', async (t) => {
  const p = promptOf(runner, 300);
  const whole = await run(runner, plan(everyPosition(0, p, 0), clear(0)));
  await run(runner, plan([], clear(0)));
  const chunked: (number | null)[] = [];
  for (let start = 0; start < p.length; start += 64) {
    chunked.push(...(await run(runner, plan(everyPosition(0, p.slice(start, start + 64), start)))));
  }
  const score = agreement(whole, chunked);
  t.diagnostic(`chunked vs whole agreement ${score.toFixed(4)} over ${whole.length} positions`);
  assert.ok(score >= 0.99, `chunked vs whole prefill top-token agreement ${score.toFixed(4)} < 0.99`);
  assert.ok(new Set(whole).size > 5, 'the model produced almost constant output; the comparison would be vacuous');
});
