// A prefix shared with seqCopy (llama_memory_seq_cp: the cells are tagged, not recomputed) must
// give the same continuation as prefilling the whole prompt. Teacher-forced for the reason given
// in batch-agreement.test.ts; without the copy, the second sequence would attend to only the
// suffix and agree far below 99%.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { LlamaRunner } from '../../../../src/engine/runner/llama/llama-runner.ts';
import { asSeqId } from '../../../../src/engine/plan.ts';
import type { StepItem, TokenLogprob } from '../../../../src/engine/plan.ts';
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

test('a sequence that adopts another copy of its prefix (seq_rm, then seq_cp) computes as before, after the other is gone', async () => {
  // Compared on log-probabilities, not greedy text: this random-weight model's greedy choice barely
  // depends on the prompt (a sequence left with only its last 32 positions still agreed 100%), its
  // next-token distribution does.
  const prompt = promptOf(runner, 160);
  const shared = 128;
  const withLogprobs = (it: StepItem): StepItem => ({ ...it, sampling: { ...it.sampling, logprobs: 20 } });
  const nextLogprobs = async (seq: number): Promise<TokenLogprob> => {
    const res = await runner.execute(plan([withLogprobs(item(seq, [prompt[5]!], prompt.length, true, true))]));
    if (!res.ok || res.logprobs?.[0] == null) throw new Error(`no logprobs: ${JSON.stringify(res)}`);
    return res.logprobs[0];
  };
  // Reference: seq 5 prefills the whole prompt itself.
  await run(runner, plan([item(5, prompt, 0, false)]));
  const ref = await nextLogprobs(5);
  // Seqs 3 and 4 both compute the shared prefix; 4 then takes 3's cells for it in place of its own,
  // and 3 leaves: 4's positions [0, 128) now live only in the cells 3 computed. (Fed at its next
  // position afterwards: llama.cpp refuses a batch whose position is not the sequence's last + 1.)
  await run(runner, plan([item(3, prompt.slice(0, shared), 0, false)]));
  await run(runner, plan([item(4, prompt, 0, false)]));
  const adopt = { kind: 'adopt' as const, srcSeqId: asSeqId(3), dstSeqId: asSeqId(4), p0: 0, p1: shared };
  await run(runner, plan([], [adopt, { kind: 'remove' as const, seqId: asSeqId(3), p0: 0, p1: -1 }]));
  const got = await nextLogprobs(4);
  assert.deepEqual(got.top.map((x) => x.tokenId), ref.top.map((x) => x.tokenId), 'the same 20 most likely next tokens');
  const worst = Math.max(...got.top.map((x, i) => Math.abs(x.logprob - ref.top[i]!.logprob)));
  assert.ok(worst < 0.02, `log-probabilities differ by up to ${worst.toFixed(4)}`);
});
