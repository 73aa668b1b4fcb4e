// The conformal controller through the real HTTP path (mock runner): a calibrated bound that does
// not fit the budget is 503 slo_unattainable with a Retry-After from the queued work; one that
// fits is served; an idle engine is explored even at a 99% guarantee; with no calibration data
// the controller admits (explores) instead of refusing.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { request } from 'undici';
import { BoundModel } from '../../src/admission/bound-model.ts';
import { ConformalController } from '../../src/admission/conformal-controller.ts';
import { createOnlineCalibrator } from '../../src/admission/conformal/online-calibrator.ts';
import { ratioScore } from '../../src/admission/conformal/score.ts';
import { createAdmissionController } from '../../src/admission/factory.ts';
import { NUM_FEATURES } from '../../src/admission/features.ts';
import { toPredictor } from '../../src/admission/predictor/predictor.ts';
import { startTestServer } from '../helpers/headroom.ts';

/** A controller whose E2E base model says `predictMs` for everything, calibrated (static) on 200 outcomes at exactly that latency. */
function fixedController(predictMs: number, guarantee: number): ConformalController {
  const alpha = 1 - guarantee;
  const initial = Array.from({ length: 200 }, () => ({ yhat: predictMs, y: predictMs }));
  const model = () => new BoundModel({ kind: 'artifact', predictor: toPredictor({ kind: 'constant', quantile: 0.9, value: predictMs, numFeatures: NUM_FEATURES }), description: 'constant' }, createOnlineCalibrator({ mode: 'static', score: ratioScore, alpha, initial }));
  return new ConformalController({ alpha, e2e: model(), ttft: model() });
}

const post = (url: string, sloMs: number, maxTokens = 8) =>
  request(`${url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-slo-ms': String(sloMs) }, body: JSON.stringify({ model: 'headroom-mock', prompt: 'the queue', max_tokens: maxTokens }) });

test('a bound over the budget is refused with 503 slo_unattainable and Retry-After; one inside it is served', async () => {
  const server = await startTestServer({ scheduler: { scheduler: 'continuous' }, admission: fixedController(2000, 0.95), mock: { cost: { speed: 1, decodeSeqMs: 4 } } });
  try {
    // Keep the engine busy so the idle exploration does not apply.
    const busy = post(server.url, 600_000, 600);
    const t0 = Date.now();
    while (server.headroom.engine.numUnfinished === 0 && Date.now() - t0 < 5000) await new Promise((r) => setTimeout(r, 5));
    await new Promise((r) => setTimeout(r, 50));
    const refused = await post(server.url, 1000);
    const body = (await refused.body.json()) as { error: { code: string; type: string; message: string } };
    assert.equal(refused.statusCode, 503);
    assert.equal(body.error.code, 'slo_unattainable');
    assert.match(body.error.message, /bound 2000 ms, budget 1000 ms/);
    const retry = Number(refused.headers['retry-after']);
    assert.ok(Number.isInteger(retry) && retry >= 1 && retry <= 60, `Retry-After ${String(refused.headers['retry-after'])}`);
    const served = await post(server.url, 5000);
    assert.equal(served.statusCode, 200);
    await served.body.json();
    const stats = (await (await request(`${server.url}/stats`)).body.json()) as { admission: { numRefused: number; reasons: Record<string, number> } };
    assert.equal(stats.admission.numRefused, 1);
    assert.equal(stats.admission.reasons['over_budget'], 1);
    // Every decision is timed, refusals included: the busy request, the refused one, the served one.
    const metrics = await (await request(`${server.url}/metrics`)).body.text();
    assert.match(metrics, /^headroom_admission_decision_seconds_count 3$/m);
    await (await busy).body.text();
  } finally {
    await server.close();
  }
});

test('a 99% guarantee admits on an idle engine (exploration), even when its bound exceeds the budget', async () => {
  const server = await startTestServer({ scheduler: { scheduler: 'continuous' }, admission: fixedController(2000, 0.99) });
  try {
    const r = await post(server.url, 100);
    assert.equal(r.statusCode, 200, 'idle engine: explored');
    await r.body.json();
  } finally {
    await server.close();
  }
});

test('an idle engine explores nothing whose budget is below its own prefill plus one decode step: 503 at once, saying so', async () => {
  // Every forward pass costs at least 150 ms (the warm-up before ready measured it): no request can finish inside 100 ms.
  const server = await startTestServer({ scheduler: { scheduler: 'continuous' }, admission: fixedController(2000, 0.99), mock: { cost: { stepOverheadMs: 150 } } });
  try {
    const refused = await post(server.url, 100, 1000);
    const body = (await refused.body.json()) as { error: { code: string; message: string } };
    assert.equal(refused.statusCode, 503);
    assert.equal(body.error.code, 'slo_unattainable');
    assert.match(body.error.message, /budget of 100 ms .* below what its own prefill and one decode step take on this engine at its measured rates \(\d+ ms\)/);
    assert.ok(Number(refused.headers['retry-after']) >= 1);
    const stats = (await (await request(`${server.url}/stats`)).body.json()) as { admission: { reasons: Record<string, number> } };
    assert.equal(stats.admission.reasons['below_floor'], 1);
    const roomy = await post(server.url, 5000, 4);
    assert.equal(roomy.statusCode, 200, 'a budget above the floor is still explored on the idle engine');
    await roomy.body.json();
  } finally {
    await server.close();
  }
});

test('with no outcomes yet the default controller explores (admits) rather than refusing, and learns from what it admits', async () => {
  const server = await startTestServer({ scheduler: { scheduler: 'continuous' }, admission: createAdmissionController({ mode: 'conformal', guarantee: 0.99, minOutcomes: 20 }) });
  try {
    for (let i = 0; i < 30; i++) {
      const r = await post(server.url, 100);
      assert.equal(r.statusCode, 200, `request ${i}`);
      await r.body.json();
    }
    const stats = (await (await request(`${server.url}/stats`)).body.json()) as { admission: { e2e: { numPredictorOutcomes: number; calibration: { numObserved: number } } } };
    assert.equal(stats.admission.e2e.numPredictorOutcomes, 30);
    assert.ok(stats.admission.e2e.calibration.numObserved > 0, 'the calibrator scored outcomes once the online model was fitted');
  } finally {
    await server.close();
  }
});
