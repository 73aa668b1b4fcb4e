// How long outputs run before they end on their own (EngineSnapshot.outputTokensP90): the
// Kaplan–Meier ring and its quantile, the engine feeding it from finished requests, and the
// throughput arithmetic planning with it — so a generous max_tokens that outputs ending at EOS never
// reach stops counting as the request's length, while a request cut at its cap (ignore_eos, a
// max_tokens: 1 probe) counts only as "at least that long".
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
import { OutputLengths } from '../../src/engine/snapshot.ts';
import { startTestGateway } from '../helpers/gateway.ts';
import { startTestServer } from '../helpers/headroom.ts';

test('OutputLengths: null below minSamples; with no censoring, the plain 90th percentile', () => {
  const f = new OutputLengths({ capacity: 20, q: 0.9, minSamples: 10 });
  for (let i = 1; i <= 9; i++) f.add(i * 10, true);
  assert.equal(f.value, null);
  f.add(100, true);
  assert.equal(f.value, 90, 'survival after 90 is 1/10');
});

test('OutputLengths: a request cut at its cap counts as "at least that long", never as a length', () => {
  const f = new OutputLengths({ capacity: 64, q: 0.9, minSamples: 10 });
  // Every request runs to its cap (ignore_eos): nothing ever ends on its own, no length is known.
  for (let i = 0; i < 30; i++) f.add(100 + i, false);
  assert.equal(f.value, null);
  // 30 probes cut at 1 token, then 10 outputs ending at 10..100: the probes leave the risk set at 1
  // and do not drag the estimate to 1 (a share of max_tokens would read them as 100%).
  const g = new OutputLengths({ capacity: 64, q: 0.9, minSamples: 10 });
  for (let i = 0; i < 30; i++) g.add(1, false);
  for (let i = 1; i <= 10; i++) g.add(i * 10, true);
  assert.equal(g.value, 90);
  // Half of the long ones cut at 50 (their cap): what ran past 50 is estimated from those still running.
  const h = new OutputLengths({ capacity: 64, q: 0.5, minSamples: 4 });
  for (const [t, e] of [[10, true], [20, true], [50, false], [50, false], [60, true], [70, true]] as const) h.add(t, e);
  // S(10) = 5/6, S(20) = 4/6, the two cut at 50 leave, S(60) = 4/6 · 1/2 = 1/3 ≤ 0.5.
  assert.equal(h.value, 60);
});

test('OutputLengths: the ring forgets the oldest', () => {
  const f = new OutputLengths({ capacity: 10, q: 0.9, minSamples: 5 });
  for (let i = 0; i < 10; i++) f.add(500, true);
  assert.equal(f.value, 500);
  for (let i = 0; i < 10; i++) f.add(5, true);
  assert.equal(f.value, 5);
});

test('OutputLengths.remaining: the 90th percentile of what is left, given how far an output has run', () => {
  const f = new OutputLengths({ capacity: 64, q: 0.9, minSamples: 10 });
  for (let i = 1; i <= 9; i++) f.add(i * 10, true);
  assert.equal(f.remaining(0), null, 'below minSamples: unknown');
  f.add(100, true);
  assert.equal(f.remaining(0), 90, 'from the start: the 90th percentile itself');
  // Past 50, five of the ten are left (60..100): S(50) = 1/2, and 1/2 · 0.1 is first reached at 100.
  assert.equal(f.remaining(50), 50);
  assert.equal(f.remaining(55), 45, 'between event times: survival is as at the last one');
  assert.equal(f.remaining(100), null, 'past every recorded length: nothing left to tell by (the caller plans for its cap)');
  // Heavy censoring at a common cap of 256: the estimate never falls far enough past 200.
  const g = new OutputLengths({ capacity: 64, q: 0.9, minSamples: 10 });
  for (let i = 1; i <= 10; i++) g.add(i * 10, true);
  for (let i = 0; i < 20; i++) g.add(256, false);
  assert.equal(g.value, null);
  assert.equal(g.remaining(200), null);
  assert.equal(g.remaining(0), null);
});

async function complete(url: string, body: Record<string, unknown>): Promise<void> {
  const r = await request(`${url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'headroom-mock', prompt: 'the queue', ...body }) });
  assert.equal(r.statusCode, 200);
  await r.body.dump();
}

test('the engine learns the length from finished requests: none while each runs to its cap, well under the cap when outputs end at EOS', async () => {
  const s = await startTestServer({ mock: { eosProbability: 0.05 } });
  try {
    for (let i = 0; i < 30; i++) await complete(s.url, { max_tokens: 40, ignore_eos: true });
    assert.equal(s.headroom.engine.snapshot(true).outputTokensP90, null, 'every output cut at its cap: no length learned');
    // Geometric lengths with mean 20 under a cap of 400: the 90th percentile is near 45.
    for (let i = 0; i < 60; i++) await complete(s.url, { max_tokens: 400, temperature: 1, seed: i });
    const p90 = s.headroom.engine.snapshot(true).outputTokensP90;
    assert.ok(p90 !== null && p90 > 10 && p90 < 200, String(p90));
    assert.equal(s.headroom.engine.stats().outputTokensP90, p90, '/stats shows it');
  } finally {
    await s.close();
  }
});

test("gateway mode: the books learn the same length from the upstream's finish reasons", async () => {
  const upstream = await startTestServer({ mock: { eosProbability: 0.05 } });
  const gw = await startTestGateway([upstream.url]);
  try {
    const books = () => gw.gateway.backend.books[0]!.snapshot(true).outputTokensP90;
    for (let i = 0; i < 30; i++) await complete(gw.url, { max_tokens: 40, ignore_eos: true });
    assert.equal(books(), null, "every output cut at its cap ('length'): no length learned");
    for (let i = 0; i < 60; i++) await complete(gw.url, { max_tokens: 400, temperature: 1, seed: i });
    const p90 = books();
    assert.ok(p90 !== null && p90 > 10 && p90 < 200, String(p90));
  } finally {
    await gw.close();
    await upstream.close();
  }
});

function snapshot(over: Partial<EngineSnapshot>): EngineSnapshot {
  return {
    numSteps: 100, atMs: 0, numWaiting: 0, numRunning: 1, numFreeSeqIds: 15, maxSequences: 16, numBlocks: 512, numFreeBlocks: 400, blockSize: 16,
    waitingPromptTokens: 0, runningPromptTokens: 0, remainingDecodeTokens: 100, promptWorkByDeadline: [],
    avgStepMs: 10, longStepMs: 10, prefillTokensPerS: 2000, decodeTokensPerS: 100, outputTokensP90: null, scheduler: {} as EngineSnapshot['scheduler'],
    ...over,
  };
}

const ctx = { requestId: 'r', arrivalMs: 0, sloMs: 4000, numPromptTokens: 200, numCachedTokens: 0, maxTokens: 512, n: 1, numMessages: 1, ttftBudgetMs: null };

test('the arithmetic plans for the shorter of max_tokens and the learned length', () => {
  const x = extractFeatures(ctx, snapshot({}), new Float64Array(NUM_FEATURES));
  const o = { maxRunning: Infinity, margin: 1, allowQueue: true, longStepMs: 10 };
  assert.equal(arithmeticEstimate(x, o)!.e2eMs, 100 + 5120, 'no length known: the cap');
  assert.equal(arithmeticEstimate(x, { ...o, outputTokensP90: 128 })!.e2eMs, 100 + 1280);
  assert.equal(arithmeticEstimate(x, { ...o, outputTokensP90: 2000 })!.e2eMs, 100 + 5120, 'never past max_tokens');
  assert.equal(x[FEATURE_NAMES.indexOf('max_tokens')], 512, 'the feature stays the cap the client sent');
});

test('cold start: a generous max_tokens is refused while no length is known, admitted once recent outputs show it is only a cap', () => {
  const alpha = 0.05;
  // An uncalibrated bound (no outcomes yet): the cold-start arithmetic decides.
  const model = () => new BoundModel({ kind: 'artifact', predictor: toPredictor({ kind: 'constant', quantile: 0.9, value: 1000, numFeatures: NUM_FEATURES }), description: 'constant' }, createOnlineCalibrator({ mode: 'rolling', score: ratioScore, alpha, initial: [] }));
  const c = new ConformalController({ alpha, e2e: model(), ttft: model() });
  // ×2 margin: (100 ms prefill + 512 × 10 ms) × 2 = 10.4 s > 4 s; with outputs of about 100 tokens: (100 + 1000) × 2 = 2.2 s.
  const unknown = snapshot({});
  assert.equal(c.fits(ctx, unknown, extractFeatures(ctx, unknown, new Float64Array(NUM_FEATURES))), false);
  const known = snapshot({ outputTokensP90: 100 });
  const x = extractFeatures(ctx, known, new Float64Array(NUM_FEATURES));
  assert.equal(c.fits(ctx, known, x), true);
  const d = c.decide(ctx, known, x);
  assert.deepEqual([d.admit, d.reason], [true, 'cold_start']);
});
