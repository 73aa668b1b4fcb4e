// A prefix shared with seqCopy (llama_memory_seq_cp: the cells are tagged, not recomputed) must
// give the same continuation as prefilling the whole prompt. Teacher-forced for the reason given
// in batch-agreement.test.ts; without the copy, the second sequence would attend to only the
// suffix and agree far below 99%.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { LlamaRunner } from '../../../../src/engine/runner/llama/llama-runner.ts';
import { asSeqId } from '../../../../src/engine/plan.ts';
import { agreement, everyPosition, item, openTinyRunner, plan, promptOf, run } from './fixture.ts';

let runner: LlamaRunner;
before(async () => {
  runner = await openTinyRunner();
});
after(async () => {
  await runner.close();
});

test('a sequence whose prefix came from seqCopy continues like one that prefilled the whole prompt', async (t) => {
  const prompt = promptOf(runner, 160);
  const shared = 128; // the prefix-cache hit: positions [0, 128)
  const steps = 32;

  // Reference: seq 2 prefills everything itself, then decodes greedily.
  const ref: number[] = [];
  let next = (await run(runner, plan([item(2, prompt, 0)])))[0]!;
  for (let i = 0; i < steps; i++) {
    ref.push(next);
    next = (await run(runner, plan([item(2, [next], prompt.length + i)])))[0]!;
  }

  // Owner seq 0 holds the prefix; seq 1 gets it by seqCopy and prefills only the suffix.
  await run(runner, plan([item(0, prompt.slice(0, shared), 0, false)]));
  const copy = { kind: 'copy' as const, srcSeqId: asSeqId(0), dstSeqId: asSeqId(1), p0: 0, p1: shared };
  const got = await run(runner, plan([item(1, prompt.slice(shared), shared)], [copy]));
  // Teacher-forced continuation: feed the reference's tokens, compare each greedy choice.
  const cont = await run(runner, plan(everyPosition(1, ref.slice(0, steps - 1), prompt.length)));
  const score = agreement([got[0]!, ...cont], ref);
  t.diagnostic(`seqCopy vs full prefill agreement ${score.toFixed(4)} over ${steps} tokens`);
  assert.ok(score >= 0.99, `seqCopy continuation agreement ${score.toFixed(4)} < 0.99`);
});
