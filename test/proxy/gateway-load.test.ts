// The gateway's books (proxy/gateway-load.ts): what admission reads in gateway mode. Counts follow
// begin/output/end exactly; the prompt work ahead is cumulative in deadline order; the rates come
// from what streams showed; the snapshot is rebuilt only after a change.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FEATURE_NAMES, NUM_FEATURES, extractFeatures } from '../../src/admission/features.ts';
import type { AdmissionContext } from '../../src/admission/controller.ts';
import { promptTokensAhead } from '../../src/engine/snapshot.ts';
import { GatewayBooks, LearnedPromptSizer } from '../../src/proxy/gateway-load.ts';

function books(slots = 0, kv: number | null = null): { load: GatewayBooks; clock: { t: number } } {
  const clock = { t: 1000 };
  return { load: new GatewayBooks(() => clock.t, { slots: () => slots, kvUsage: () => kv }), clock };
}

test('gateway books: waiting, running, prompt work by deadline and remaining decode follow begin/output/end', () => {
  const { load, clock } = books(8, 0.25);
  const late = load.begin({ arrivalMs: 1000, deadlineMs: 9000, promptTokens: 300, decodeTokens: 50 });
  const early = load.begin({ arrivalMs: 1000, deadlineMs: 5000, promptTokens: 100, decodeTokens: 20 });
  let s = load.snapshot();
  assert.equal(s.numWaiting, 2);
  assert.equal(s.numRunning, 0);
  assert.equal(s.waitingPromptTokens, 400);
  assert.equal(s.remainingDecodeTokens, 70);
  assert.deepEqual(s.promptWorkByDeadline, [{ deadlineMs: 5000, cumulativeTokens: 100 }, { deadlineMs: 9000, cumulativeTokens: 400 }]);
  assert.equal(promptTokensAhead(s, 6000), 100);
  assert.equal(s.maxSequences, 8);
  assert.equal(s.numFreeSeqIds, 6);
  assert.equal(s.numFreeBlocks / s.numBlocks, 0.75);
  assert.equal(load.snapshot(), s, 'unchanged books give the same frozen snapshot');

  clock.t = 1500;
  load.output(early, 1, 0, clock.t);
  s = load.snapshot();
  assert.equal(s.numWaiting, 1);
  assert.equal(s.numRunning, 1);
  assert.equal(s.remainingDecodeTokens, 69);
  assert.deepEqual(s.promptWorkByDeadline, [{ deadlineMs: 9000, cumulativeTokens: 300 }]);
  // (work ahead at its arrival: none due before it) + its own 100 tokens in 0.5 s.
  assert.equal(s.prefillTokensPerS, 200);

  load.output(early, 2, 10, 1520);
  s = load.snapshot();
  assert.equal(s.avgStepMs, 10);
  assert.equal(s.remainingDecodeTokens, 67);

  load.end(early);
  load.end(early);
  s = load.snapshot();
  assert.equal(load.numInFlight, 1);
  assert.equal(s.numRunning, 0);
  assert.equal(s.numFreeSeqIds, 7);
  load.end(late);
  assert.equal(load.snapshot().numWaiting, 0);
  assert.equal(load.snapshot().remainingDecodeTokens, 0);
});

test('gateway books: a prefill-rate sample counts the prompt work that was due ahead of the request when it arrived', () => {
  const { load } = books();
  load.begin({ arrivalMs: 0, deadlineMs: 1000, promptTokens: 600, decodeTokens: 1 });
  const b = load.begin({ arrivalMs: 0, deadlineMs: 2000, promptTokens: 400, decodeTokens: 1 });
  load.output(b, 1, 0, 2000);
  assert.equal(load.snapshot().prefillTokensPerS, 500, '(600 ahead + 400 own) tokens in 2 s');
});

test('gateway books: decode rate is output events per second over all streams, idle stretches excluded', () => {
  const { load } = books();
  const a = load.begin({ arrivalMs: 0, deadlineMs: 1e6, promptTokens: 10, decodeTokens: 1000 });
  const b = load.begin({ arrivalMs: 0, deadlineMs: 1e6, promptTokens: 10, decodeTokens: 1000 });
  for (let t = 10; t <= 600; t += 10) {
    load.output(a, 1, 10, t);
    load.output(b, 1, 10, t);
  }
  assert.equal(load.snapshot().decodeTokensPerS, 200, 'two streams, 100 tokens a second each');
  // Nothing for 10 s, then the same pace again: the window across the gap is not a rate of 2 tokens/s.
  for (let t = 10_600; t <= 11_200; t += 10) {
    load.output(a, 1, 10, t);
    load.output(b, 1, 10, t);
  }
  assert.equal(load.snapshot().decodeTokensPerS, 200);
});

test('prompt sizer: 4 bytes a token until usage reports teach the ratio', () => {
  const sizer = new LearnedPromptSizer();
  assert.equal(sizer.estimateTokens(400), 100);
  assert.equal(sizer.estimateTokens(0), 1);
  sizer.learn(300, 100);
  assert.equal(sizer.estimateTokens(300), 100);
});

test('gateway books: the features admission extracts read them as they read an engine snapshot', () => {
  const { load } = books(4);
  load.begin({ arrivalMs: 0, deadlineMs: 3000, promptTokens: 250, decodeTokens: 64 });
  const ctx: AdmissionContext = { requestId: 'x', arrivalMs: 0, sloMs: 4000, numPromptTokens: 120, numCachedTokens: 0, maxTokens: 32, n: 1, numMessages: 2, ttftBudgetMs: null };
  const x = extractFeatures(ctx, load.snapshot(), new Float64Array(NUM_FEATURES));
  const f = (n: (typeof FEATURE_NAMES)[number]): number => x[FEATURE_NAMES.indexOf(n)]!;
  assert.equal(f('prompt_work_ahead'), 250);
  assert.equal(f('waiting'), 1);
  assert.equal(f('remaining_decode_tokens'), 64);
  assert.equal(f('free_seq_fraction'), 0.75);
  assert.equal(f('new_prefill_tokens'), 120);
});

test('gateway books: a non-streamed answer counts its tokens towards the decode rate, and teaches no prefill or step time', () => {
  const { load } = books();
  const a = load.begin({ arrivalMs: 0, deadlineMs: 9000, promptTokens: 100, decodeTokens: 50 });
  const b = load.begin({ arrivalMs: 0, deadlineMs: 9000, promptTokens: 100, decodeTokens: 50 });
  load.wholeOutput(a, 40, 1000);
  assert.equal(load.snapshot().remainingDecodeTokens, 10 + 50);
  load.end(a);
  // Output between the two completions: 40 tokens in 1 s.
  load.wholeOutput(b, 30, 2000);
  const s = load.snapshot();
  assert.equal(s.decodeTokensPerS, 40);
  assert.equal(s.prefillTokensPerS, null);
  assert.equal(s.avgStepMs, null);
  load.end(b);
  load.wholeOutput(b, 5, 2100);
  assert.equal(load.snapshot().remainingDecodeTokens, 0, 'an ended entry learns nothing more');
});
