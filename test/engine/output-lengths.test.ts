// The share of max_tokens finished requests used (EngineSnapshot.outputFractionP90): the ring and its
// quantile, the engine feeding it from finished requests only, and the throughput arithmetic
// planning with it — so a generous max_tokens that outputs ending at EOS never reach stops
// counting as the request's length.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { request } from 'undici';
import { ConformalController } from '../../src/admission/conformal-controller.ts';
import { BoundModel } from '../../src/admission/bound-model.ts';
import { createOnlineCalibrator } from '../../src/admission/conformal/online-calibrator.ts';
import { ratioScore } from '../../src/admission/conformal/score.ts';
import { arithmeticEstimate } from '../../src/admission/decision/headroom.ts';
import { FEATURE_NAMES, NUM_FEATURES, extractFeatures } from '../../src/admission/features.ts';
import { toPredictor } from '../../src/admission/predictor/predictor.ts';
import type { EngineSnapshot } from '../../src/engine/snapshot.ts';
import { OutputFractions } from '../../src/engine/snapshot.ts';
import { startTestServer } from '../helpers/headroom.ts';

test('OutputFractions: null below minSamples, then the q-quantile of the last `capacity` shares, clamped to [0, 1]', () => {
  const f = new OutputFractions({ capacity: 10, q: 0.9, minSamples: 5 });
  for (let i = 1; i <= 4; i++) f.add(i, 10);
  assert.equal(f.value, null);
  f.add(5, 10);
  assert.equal(f.value, 0.5, 'ceil(0.9 × 5) = the 5th smallest of 0.1..0.5');
  f.add(0, 0); // a cap of 0 says nothing
  f.add(30, 10); // clamped: a share is at most 1
  assert.equal(f.value, 1);
  // Ten more small shares push every earlier one out of the ring.
  for (let i = 0; i < 10; i++) f.add(1, 100);
  assert.equal(f.value, 0.01);
});

async function complete(url: string, body: Record<string, unknown>): Promise<void> {
  const r = await request(`${url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'headroom-mock', prompt: 'the queue', ...body }) });
  assert.equal(r.statusCode, 200);
  await r.body.dump();
}

test('the engine learns the share from finished requests: 1 when each runs to its cap, well under 1 when outputs end at EOS', async () => {
  const s = await startTestServer({ mock: { eosProbability: 0.05 } });
  try {
    for (let i = 0; i < 19; i++) await complete(s.url, { max_tokens: 40, ignore_eos: true });
    assert.equal(s.headroom.engine.snapshot(true).outputFractionP90, null, 'fewer than 20 finished');
    await complete(s.url, { max_tokens: 40, ignore_eos: true });
    assert.equal(s.headroom.engine.snapshot(true).outputFractionP90, 1);
  } finally {
    await s.close();
  }
  const n = await startTestServer({ mock: { eosProbability: 0.05 } });
  try {
    // Geometric lengths with mean 20 under a cap of 400: the 90th percentile share is near 46/400.
    for (let i = 0; i < 60; i++) await complete(n.url, { max_tokens: 400, temperature: 1, seed: i });
    const p90 = n.headroom.engine.snapshot(true).outputFractionP90;
    assert.ok(p90 !== null && p90 > 0 && p90 < 0.5, String(p90));
  } finally {
    await n.close();
  }
});

function snapshot(over: Partial<EngineSnapshot>): EngineSnapshot {
  return {
    numSteps: 100, atMs: 0, numWaiting: 0, numRunning: 1, numFreeSeqIds: 15, maxSequences: 16, numBlocks: 512, numFreeBlocks: 400, blockSize: 16,
    waitingPromptTokens: 0, runningPromptTokens: 0, remainingDecodeTokens: 100, promptWorkByDeadline: [],
    avgStepMs: 10, longStepMs: 10, prefillTokensPerS: 2000, decodeTokensPerS: 100, outputFractionP90: null, scheduler: {} as EngineSnapshot['scheduler'],
    ...over,
  };
}

const ctx = { requestId: 'r', arrivalMs: 0, sloMs: 4000, numPromptTokens: 200, numCachedTokens: 0, maxTokens: 512, n: 1, numMessages: 1, ttftBudgetMs: null };

test('the arithmetic plans for max_tokens × the share, never more than max_tokens', () => {
  const x = extractFeatures(ctx, snapshot({}), new Float64Array(NUM_FEATURES));
  const o = { maxRunning: Infinity, margin: 1, allowQueue: true, longStepMs: 10 };
  assert.equal(arithmeticEstimate(x, o)!.e2eMs, 100 + 5120, 'no share known: the cap');
  assert.equal(arithmeticEstimate(x, { ...o, outputFraction: 0.25 })!.e2eMs, 100 + 1280);
  assert.equal(arithmeticEstimate(x, { ...o, outputFraction: 1.5 })!.e2eMs, 100 + 5120);
  assert.equal(x[FEATURE_NAMES.indexOf('max_tokens')], 512, 'the feature stays the cap the client sent');
});

test('cold start: a generous max_tokens is refused while the share is unknown, admitted once recent outputs show it is a cap', () => {
  const alpha = 0.05;
  // An uncalibrated bound (no outcomes yet): the cold-start arithmetic decides.
  const model = () => new BoundModel({ kind: 'artifact', predictor: toPredictor({ kind: 'constant', quantile: 0.9, value: 1000, numFeatures: NUM_FEATURES }), description: 'constant' }, createOnlineCalibrator({ mode: 'rolling', score: ratioScore, alpha, initial: [] }));
  const c = new ConformalController({ alpha, e2e: model(), ttft: model() });
  // ×2 margin: (100 ms prefill + 512 × 10 ms) × 2 = 10.4 s > 4 s; with a share of 0.2: (100 + 1024) × 2 = 2.2 s.
  const unknown = snapshot({});
  assert.equal(c.fits(ctx, unknown, extractFeatures(ctx, unknown, new Float64Array(NUM_FEATURES))), false);
  const known = snapshot({ outputFractionP90: 0.2 });
  const x = extractFeatures(ctx, known, new Float64Array(NUM_FEATURES));
  assert.equal(c.fits(ctx, known, x), true);
  const d = c.decide(ctx, known, x);
  assert.deepEqual([d.admit, d.reason], [true, 'explore']);
});
