// The native sampler chain and log-probabilities, through the llama runner without the engine:
// log-probabilities come from the raw logits (no sampler changes them), a grammar resumes after
// the output history it is given, and a grammar llama.cpp refuses is a refused step, never a crash.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { LlamaRunner } from '../../../../src/engine/runner/llama/llama-runner.ts';
import { asSeqId } from '../../../../src/engine/plan.ts';
import type { SamplingParams, StepItem, TokenLogprob } from '../../../../src/engine/plan.ts';
import { openTinyRunner, promptOf } from './fixture.ts';

let runner: LlamaRunner;
before(async () => {
  runner = await openTinyRunner({ threads: 1 });
});
after(async () => {
  await runner.close();
});

/** The byte-fallback token of one ASCII character (ids 3..258 are <0x00>..<0xFF>). */
const byteToken = (ch: string): number => 3 + ch.charCodeAt(0);
const piece = (id: number): string => Buffer.from(runner.tokenizer.tokenBytes(id)).toString('utf8');

function firstItem(seq: number, prompt: readonly number[], sampling: SamplingParams, history?: readonly number[]): StepItem {
  const tokens = history ?? prompt;
  return {
    requestId: `s${seq}`,
    seqId: asSeqId(seq),
    tokens,
    startPos: 0,
    sample: true,
    resetSampler: true,
    sampling,
    samplerHistory: { tokens, numPromptTokens: prompt.length },
  };
}

async function sampleOnce(seq: number, prompt: readonly number[], sampling: SamplingParams, history?: readonly number[]): Promise<{ token: number; logprob: TokenLogprob | null }> {
  const res = await runner.execute({ kvOps: [{ kind: 'remove', seqId: asSeqId(seq), p0: 0, p1: -1 }], items: [firstItem(seq, prompt, sampling, history)] });
  if (!res.ok) throw new Error(`${res.reason}: ${res.message}`);
  return { token: res.sampled[0]!, logprob: res.logprobs?.[0] ?? null };
}

test('log-probabilities: the greedy token is the most likely, ordered, and independent of temperature and bias (raw logits)', async () => {
  const prompt = promptOf(runner, 24);
  const greedy = await sampleOnce(0, prompt, { temperature: 0, topP: 1, seed: 0, logprobs: 20 });
  const lp = greedy.logprob!;
  assert.equal(lp.top.length, 20);
  assert.equal(lp.top[0]!.tokenId, greedy.token);
  assert.equal(lp.logprob, lp.top[0]!.logprob);
  for (let i = 1; i < 20; i++) assert.ok(lp.top[i - 1]!.logprob >= lp.top[i]!.logprob);
  assert.ok(lp.top.reduce((s, t) => s + Math.exp(t.logprob), 0) < 1);
  const hot = await sampleOnce(1, prompt, { temperature: 2, topP: 1, seed: 9, logprobs: 5, logitBias: [{ tokenId: 500, bias: 100 }] });
  assert.equal(hot.token, 500, 'the bias chose the token');
  assert.deepEqual(hot.logprob!.top, lp.top.slice(0, 5), 'the same alternatives: neither temperature nor bias touched them');
  assert.ok(hot.logprob!.logprob < lp.top[4]!.logprob, "the biased token's raw log-probability is its own, low one");
  const none = await sampleOnce(2, prompt, { temperature: 0, topP: 1, seed: 0 });
  assert.equal(none.logprob, null, 'not asked: none computed');
});

test('a grammar resumes after the output history it is given (a preempted or re-forked sequence)', async () => {
  const prompt = promptOf(runner, 8);
  const grammar = 'root ::= "abcd"';
  const fresh = await sampleOnce(0, prompt, { temperature: 0, topP: 1, seed: 0, grammar });
  assert.ok('abcd'.startsWith(piece(fresh.token)) && piece(fresh.token).length > 0, `fresh: ${piece(fresh.token)}`);
  const resumed = await sampleOnce(0, prompt, { temperature: 0, topP: 1, seed: 0, grammar }, [...prompt, byteToken('a'), byteToken('b')]);
  assert.ok('cd'.startsWith(piece(resumed.token)) && piece(resumed.token).length > 0, `after "ab": ${piece(resumed.token)}`);
});

test('a grammar llama.cpp refuses, or history it cannot follow, is a refused step, not a crash', async () => {
  const prompt = promptOf(runner, 8);
  for (const [grammar, history] of [
    ['root ::= undefined-rule', undefined],
    ['root ::= "abcd"', [...prompt, byteToken('x')]],
  ] as const) {
    const res = await runner.execute({ kvOps: [{ kind: 'remove', seqId: asSeqId(3), p0: 0, p1: -1 }], items: [firstItem(3, prompt, { temperature: 0, topP: 1, seed: 0, grammar }, history)] });
    assert.equal(res.ok, false);
    assert.ok(!res.ok && res.reason === 'backend_error' && /grammar/.test(res.message), JSON.stringify(res));
  }
  // The runner still works.
  assert.equal(typeof (await sampleOnce(3, prompt, { temperature: 0, topP: 1, seed: 0 })).token, 'number');
});
