// Self-training: the server fits a quantile GBDT on its own admitted outcomes (off the event loop)
// and swaps it in with the held-out outcomes as its calibration — when, and only when, it beats the
// current predictor on them. Checked in-thread (deterministic) and once through the real worker.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { AdmissionContext, AdmissionController } from '../../src/admission/controller.ts';
import { createAdmissionController } from '../../src/admission/factory.ts';
import { warmFeatures as features } from '../helpers/admission-features.ts';
import { runTrainJob } from '../../src/admission/self-train/train-job.ts';
import type { EngineSnapshot } from '../../src/engine/snapshot.ts';

const ctx = (arrivalMs: number): AdmissionContext => ({ requestId: 'r', arrivalMs, sloMs: 60_000, numPromptTokens: 200, numCachedTokens: 0, maxTokens: 100, n: 1, numMessages: 1, ttftBudgetMs: null });
const snap = { maxSequences: 16, numRunning: 2, numWaiting: 0, waitingPromptTokens: 0, runningPromptTokens: 0, remainingDecodeTokens: 50, avgStepMs: 10, prefillTokensPerS: 2000, decodeTokensPerS: 200 } as EngineSnapshot;
type SelfState = { numTrainings: number; numSwaps: number; numKept: number; training: boolean; lastSwap: { rows: number; heldOut: number; pinball: number; previousPinball: number | null } | null; lastError: string | null; coverageSinceSwap: number | null };
const e2eState = (c: AdmissionController) => (c.state() as { e2e: { predictor: string; calibration: { status: string; n: number }; selfTraining: SelfState | null } }).e2e;

/** Latency with a cliff the linear baseline cannot fit: past 3 running requests every request waits for a long one. */
function serve(c: AdmissionController, n: number, from = 0): void {
  for (let i = from; i < from + n; i++) {
    const prompt = 100 + ((i * 37) % 400);
    const running = i % 7;
    const x = features({ prompt_tokens: prompt, new_prefill_tokens: prompt, running });
    const d = c.decide(ctx(i * 10), snap, x);
    const noise = (i * 7919) % 97;
    if (d.admit) c.observe(x, d, { e2eMs: (running > 3 ? 3000 : 300) + prompt * 2 + noise, ttftMs: 50, censored: false });
  }
}

async function settled(c: AdmissionController): Promise<SelfState> {
  for (;;) {
    const s = e2eState(c).selfTraining!;
    if (!s.training) return s;
    await new Promise((r) => setTimeout(r, 10));
  }
}

test('in-thread: trains at minRows, swaps in a model that beats the baseline on held-out outcomes, calibrated on them', async () => {
  const c = createAdmissionController({ mode: 'conformal', selfTrain: true, selfTrainOptions: { minRows: 150, retrainEvery: 100_000, runJob: (job) => Promise.resolve(runTrainJob(job)) } });
  serve(c, 149);
  assert.equal(e2eState(c).selfTraining!.numTrainings, 0, 'not before minRows');
  assert.match(e2eState(c).predictor, /online throughput baseline/);
  serve(c, 1, 149);
  const s = await settled(c);
  assert.equal(s.numTrainings, 1);
  assert.equal(s.numSwaps, 1, JSON.stringify(s));
  assert.ok(s.lastSwap !== null && s.lastSwap.previousPinball !== null && s.lastSwap.pinball < s.lastSwap.previousPinball, `held-out pinball ${JSON.stringify(s.lastSwap)}`);
  assert.equal(s.lastSwap.heldOut, 50);
  const e2e = e2eState(c);
  assert.match(e2e.predictor, /self-trained gbdt \(τ=0\.9, 100 rows, calibrated on the next 50\)/);
  assert.equal(e2e.calibration.status, 'calibrated');
  assert.equal(e2e.calibration.n, 50, 'the held-out scores are the calibration window');
  // The swapped bound keeps its promise on more of the same traffic.
  serve(c, 400, 150);
  const after = await settled(c);
  assert.ok(after.coverageSinceSwap !== null && after.coverageSinceSwap >= 0.9, `coverage since the swap ${String(after.coverageSinceSwap)}`);
});

test('in-thread: a model that does not beat the current one on held-out outcomes is not swapped in', async () => {
  // A job that fits nothing useful: every latency the same, so the GBDT predicts a constant.
  const c = createAdmissionController({
    mode: 'conformal',
    selfTrain: true,
    selfTrainOptions: { minRows: 150, retrainEvery: 100_000, runJob: (job) => Promise.resolve(runTrainJob({ ...job, y: job.y.map(() => 1) })) },
  });
  serve(c, 150);
  const s = await settled(c);
  assert.equal(s.numTrainings, 1);
  assert.equal(s.numSwaps, 0);
  assert.equal(s.numKept, 1);
  assert.match(e2eState(c).predictor, /online throughput baseline/);
});

test('an artifact turns self-training off; so does leaving it unset', () => {
  assert.equal(e2eState(createAdmissionController({ mode: 'conformal' })).selfTraining, null);
  assert.equal(e2eState(createAdmissionController({ mode: 'conformal', selfTrain: true, artifactPath: 'results/admission/mock/e2e-gbdt.json' })).selfTraining, null);
});

test('the worker thread trains and the swap happens with the event loop free', async () => {
  const c = createAdmissionController({ mode: 'conformal', selfTrain: true, selfTrainOptions: { minRows: 150, retrainEvery: 100_000 } });
  serve(c, 150);
  assert.equal(e2eState(c).selfTraining!.training, true, 'training runs after observe() returned');
  // The loop keeps turning while the worker fits.
  let ticks = 0;
  const timer = setInterval(() => ticks++, 1);
  const s = await settled(c);
  clearInterval(timer);
  assert.equal(s.lastError, null);
  assert.equal(s.numSwaps, 1, JSON.stringify(s));
  assert.ok(ticks > 0);
  assert.match(e2eState(c).predictor, /self-trained gbdt/);
});
