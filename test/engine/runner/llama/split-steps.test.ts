// A step that mixes decoding rows with a prompt chunk runs as two llama_decode calls
// (step-layout.ts): it must compute what one call computes, hand each plan item its own result,
// and, refused half-way, leave the KV state as it was.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ensureDefaultModel } from '../../../../src/model/default-model.ts';
import { llamaBinsDir, loadLlamaAddon } from '../../../../src/engine/runner/llama/addon.ts';
import type { RunnerPlan, StepItem, TokenLogprob } from '../../../../src/engine/plan.ts';
import { item, openTinyRunner, plan, promptOf } from './fixture.ts';

const withLogprobs = (it: StepItem): StepItem => ({ ...it, sampling: { ...it.sampling, logprobs: 8 } });

/** Three sequences: prompts that start beside decoding ones (plan order: the chunk first), then all three decoding. */
async function script(splitSteps: boolean): Promise<{ sampled: (number | null)[][]; logprobs: (TokenLogprob | null)[][]; numSplitSteps: number }> {
  const runner = await openTinyRunner({ splitSteps, maxBatchTokens: 512 });
  try {
    const prompt = promptOf(runner, 240);
    const sampled: (number | null)[][] = [];
    const logprobs: (TokenLogprob | null)[][] = [];
    const step = async (items: StepItem[]): Promise<(number | null)[]> => {
      const res = await runner.execute(plan(items.map(withLogprobs)));
      if (!res.ok) throw new Error(`step refused: ${res.reason}: ${res.message}`);
      sampled.push([...res.sampled]);
      logprobs.push([...(res.logprobs ?? [])]);
      return [...res.sampled];
    };
    const pos = [0, 0, 0];
    const next: number[] = [];
    const start = (seq: number, n: number): StepItem => {
      const it = item(seq, prompt.slice(seq * 7, seq * 7 + n), 0, true, true);
      pos[seq] = n;
      return it;
    };
    const dec = (seq: number): StepItem => item(seq, [next[seq]!], pos[seq]!++, true);
    let s = await step([start(0, 120)]);
    next[0] = s[0]!;
    s = await step([start(1, 100), dec(0)]);
    [next[1], next[0]] = [s[0]!, s[1]!];
    s = await step([dec(1), start(2, 80), dec(0)]);
    [next[1], next[2], next[0]] = [s[0]!, s[1]!, s[2]!];
    for (let i = 0; i < 6; i++) {
      s = await step([dec(2), dec(0), dec(1)]);
      [next[2], next[0], next[1]] = [s[0]!, s[1]!, s[2]!];
    }
    return { sampled, logprobs, numSplitSteps: runner.numSplitSteps };
  } finally {
    await runner.close();
  }
}

test('two calls compute what one call does: every item its own tokens and log-probabilities', async (t) => {
  const split = await script(true);
  const whole = await script(false);
  assert.equal(split.numSplitSteps, 2, 'the two steps that start a prompt beside decoding rows were cut');
  assert.equal(whole.numSplitSteps, 0);
  assert.deepEqual(split.sampled, whole.sampled);
  // Compared by token id: in this random-weight model's nearly flat distribution the last places
  // of a top 8 can hold near-ties that a different float summation order swaps.
  let worst = 0;
  split.logprobs.forEach((stepLp, s) =>
    stepLp.forEach((lp, i) => {
      const ref = whole.logprobs[s]![i]!;
      assert.ok(lp !== null && ref !== null, `step ${s} item ${i} has log-probabilities`);
      worst = Math.max(worst, Math.abs(lp.logprob - ref.logprob));
      const refById = new Map(ref.top.map((x) => [x.tokenId, x.logprob]));
      const shared = lp.top.filter((x) => refById.has(x.tokenId));
      assert.ok(shared.length >= 6, `step ${s} item ${i}: ${shared.length} of the 8 most likely tokens shared`);
      for (const x of shared) worst = Math.max(worst, Math.abs(x.logprob - refById.get(x.tokenId)!));
    }),
  );
  t.diagnostic(`largest log-probability difference ${worst.toFixed(5)}`);
  assert.ok(worst < 0.02, `log-probabilities differ by up to ${worst.toFixed(4)}`);
});

test('a segment refused for want of cells takes out what the segments before it wrote', async () => {
  const addon = loadLlamaAddon();
  const ctx = new addon.HeadroomLlama({ modelPath: await ensureDefaultModel(), binsDir: llamaBinsDir(), nCtx: 256, nCtxMax: 8192, nSeqMax: 4, nBatch: 256, nUbatch: 256, threads: 2, threadsBatch: 2, verbose: false });
  try {
    assert.equal(ctx.info().nCtx, 256);
    const toks = ctx.tokenize('the queue and the server and the river and the stone '.repeat(30), true, false);
    const rows = (seq: number, from: number, n: number): { tokens: number[]; pos: number[]; seq: number[] } => ({
      tokens: [...toks.slice(from, from + n)],
      pos: Array.from({ length: n }, (_, i) => from + i),
      seq: Array.from({ length: n }, () => seq),
    });
    const decode = (parts: ReturnType<typeof rows>[], ends?: number[]): ReturnType<typeof ctx.decodeSync> => {
      const t = parts.flatMap((p) => p.tokens);
      return ctx.decodeSync(Int32Array.from(t), Int32Array.from(parts.flatMap((p) => p.pos)), Int32Array.from(parts.flatMap((p) => p.seq)), Uint8Array.from(t, () => 0), ends === undefined ? undefined : Int32Array.from(ends));
    };
    assert.equal(decode([rows(0, 0, 100)]).status, 0);
    assert.equal(decode([rows(2, 0, 90)]).status, 0);
    // 190 of 256 cells in use: seq 0's next row fits, seq 1's 70-row chunk does not.
    const refused = decode([rows(0, 100, 1), rows(1, 0, 70)], [1, 71]);
    assert.equal(refused.status, 1);
    assert.equal(refused.numCalls, 2, 'the first segment ran');
    assert.equal(ctx.seqPosMax(0), 99, "the first segment's cell was taken out again");
    assert.equal(ctx.seqPosMax(1), -1);
    // The same rows in one call are refused as a whole too, and seq 0 continues from position 100.
    assert.equal(decode([rows(0, 100, 1), rows(1, 0, 70)]).status, 1);
    const ok = decode([rows(0, 100, 1), rows(1, 0, 60)], [1, 61]);
    assert.equal(ok.status, 0);
    assert.equal(ok.numCalls, 2);
    assert.equal(ctx.seqPosMax(0), 100);
    assert.equal(ctx.seqPosMax(1), 59);
    // Segment ends are checked.
    for (const bad of [[0, 61], [30, 30, 61], [30, 60], [30, 62]]) assert.throws(() => decode([rows(0, 101, 1), rows(3, 0, 60)], bad), /segmentEnds/);
    assert.throws(() => ctx.decodeSync(Int32Array.of(1), Int32Array.of(101), Int32Array.of(0), Uint8Array.of(0), Float64Array.of(1) as unknown as Int32Array), /segmentEnds/);
  } finally {
    ctx.close();
  }
});

test('the runner cuts only steps of 64 rows or more that mix single rows with chunks', async () => {
  const runner = await openTinyRunner({ maxBatchTokens: 512 });
  try {
    const p = promptOf(runner, 200);
    const exec = async (r: RunnerPlan): Promise<void> => {
      const res = await runner.execute(r);
      assert.ok(res.ok, JSON.stringify(res));
    };
    await exec(plan([item(0, p.slice(0, 100), 0, true, true)]));
    await exec(plan([item(0, [p[100]!], 100), item(1, p.slice(0, 40), 0, true, true)]));
    assert.equal(runner.numSplitSteps, 0, '41 rows: one call');
    await exec(plan([item(0, [p[101]!], 101), item(1, p.slice(40, 140), 40)]));
    assert.equal(runner.numSplitSteps, 1, '101 rows: two calls');
    assert.equal(runner.lastTiming?.rows, 101);
  } finally {
    await runner.close();
  }
});
