// Keeping admitted requests on time (decision/protect.ts): a request that fits its own budget is
// refused when admitting it would push a running request from on time to late by the measured
// step times — and only then: not when the running request is late anyway, not where nothing tells
// (a gateway's view), and not with --admission-protect-running off.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { BoundModel } from '../../../src/admission/bound-model.ts';
import { ConformalController } from '../../../src/admission/conformal-controller.ts';
import { createOnlineCalibrator } from '../../../src/admission/conformal/online-calibrator.ts';
import { ratioScore } from '../../../src/admission/conformal/score.ts';
import { delaysAdmitted } from '../../../src/admission/decision/protect.ts';
import { NUM_FEATURES, extractFeatures } from '../../../src/admission/features.ts';
import { toPredictor } from '../../../src/admission/predictor/predictor.ts';
import type { EngineSnapshot } from '../../../src/engine/snapshot.ts';

// Step time 10 ms per decoding sequence: 10, 20, 30, ... ms at batch 1, 2, 3, ...
const table = Float64Array.from({ length: 16 }, (_, i) => 10 * (i + 1));

function snapshot(over: Partial<EngineSnapshot>): EngineSnapshot {
  return {
    numSteps: 100, atMs: 1000, numWaiting: 0, numRunning: 1, numFreeSeqIds: 15, maxSequences: 16, numBlocks: 512, numFreeBlocks: 400, blockSize: 16,
    waitingPromptTokens: 0, runningPromptTokens: 0, remainingDecodeTokens: 100, promptWorkByDeadline: [],
    avgStepMs: 10, longStepMs: 10, prefillTokensPerS: 1000, decodeTokensPerS: 100, outputTokensP90: 10, stepMsByBatch: table, recentDecodeBatch: 1,
    scheduler: {} as EngineSnapshot['scheduler'],
    ...over,
  };
}

const ctx = { requestId: 'r', arrivalMs: 1000, sloMs: 4000, numPromptTokens: 100, numCachedTokens: 0, maxTokens: 10, n: 1, numMessages: 1, ttftBudgetMs: null };
const features = (s: EngineSnapshot) => extractFeatures(ctx, s, new Float64Array(NUM_FEATURES));

test('delaysAdmitted: on time alone, late with the new request → its deadline; else null', () => {
  // One running request, 100 tokens left: alone 100 × 10 ms = 1 s; with the new one 100 ms of
  // prefill + 100 × 20 ms = 2.1 s. Now is 1000 ms.
  const at = (deadlineMs: number) => snapshot({ runningDeadlines: Float64Array.from([deadlineMs, 100]) });
  assert.equal(delaysAdmitted(features(at(2500)), at(2500)), 2500, 'on time alone (2000 ≤ 2500), late with it (3100)');
  assert.equal(delaysAdmitted(features(at(3200)), at(3200)), null, 'on time either way');
  assert.equal(delaysAdmitted(features(at(1500)), at(1500)), null, 'late either way: refusing cannot save it');
  assert.equal(delaysAdmitted(features(at(3100)), at(3100)), null, 'exactly at the deadline is on time');
  // The new request's prefill counts: 100 prompt tokens at 1000/s is 100 ms.
  assert.equal(delaysAdmitted(features(at(3050)), at(3050)), 3050);
  // Any of several: the second one is the one pushed late.
  const two = snapshot({ numRunning: 2, runningDeadlines: Float64Array.from([9000, 10, 4000, 100]) });
  // Batch 2 → 3: alone 100 × 20 = 2000 → 3000 ≤ 4000; with it 100 + 100 × 30 = 3100 → 4100 > 4000.
  assert.equal(delaysAdmitted(features(two), two), 4000);
});

test('delaysAdmitted: nothing to tell by → null', () => {
  const s = snapshot({ runningDeadlines: Float64Array.from([2500, 100]) });
  assert.equal(delaysAdmitted(features(snapshot({})), snapshot({})), null, "a gateway's view has no running deadlines");
  assert.equal(delaysAdmitted(features(snapshot({ runningDeadlines: new Float64Array(0) })), snapshot({ runningDeadlines: new Float64Array(0) })), null, 'nothing running');
  const noTable = { ...s, stepMsByBatch: null };
  assert.equal(delaysAdmitted(features(noTable), noTable), null, 'no step time measured by batch');
  const noRate = { ...s, prefillTokensPerS: null };
  assert.equal(delaysAdmitted(features(noRate), noRate), null, 'prefill rate unmeasured');
});

function controller(protectRunning: boolean): ConformalController {
  const alpha = 0.05;
  // An uncalibrated bound: the cold-start arithmetic decides, and this request fits it easily
  // ((100 ms prefill + 10 tokens × 20 ms) × 2 = 600 ms ≤ 4 s).
  const model = () => new BoundModel({ kind: 'artifact', predictor: toPredictor({ kind: 'constant', quantile: 0.9, value: 1000, numFeatures: NUM_FEATURES }), description: 'constant' }, createOnlineCalibrator({ mode: 'rolling', score: ratioScore, alpha, initial: [] }));
  return new ConformalController({ alpha, e2e: model(), ttft: model(), protectRunning });
}

test('the controller refuses what would delay a running request (delays_running, 503 with Retry-After), and admits it with protection off', () => {
  const s = snapshot({ runningDeadlines: Float64Array.from([2500, 100]) });
  const on = controller(true).decide(ctx, s, features(s));
  assert.equal(on.admit, false);
  assert.equal(on.reason, 'delays_running');
  assert.ok(!on.admit && (on.refusal.retryAfterS ?? 0) >= 1 && /already running/.test(on.refusal.message), JSON.stringify(on));
  const off = controller(false).decide(ctx, s, features(s));
  assert.equal(off.admit, true);
  assert.equal(off.reason, 'cold_start');
  const roomy = snapshot({ runningDeadlines: Float64Array.from([9000, 100]) });
  const c = controller(true);
  assert.equal(c.decide(ctx, roomy, features(roomy)).admit, true, 'a running request with slack to spare blocks nothing');
  assert.deepEqual((c.state().reasons as Record<string, number>)['cold_start'], 1);
});
