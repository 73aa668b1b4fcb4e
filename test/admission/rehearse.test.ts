// The rehearsal before /ready runs the decision path on a twin: it must leave the serving
// controller exactly as it was (counters, quota, hysteresis, the shortcut's record), decide the way
// the controller would, and reach the decision's branches (fits, refusals, the shortcut).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { AdmissionContext } from '../../src/admission/controller.ts';
import { createAdmissionController } from '../../src/admission/factory.ts';
import { NUM_FEATURES, extractFeatures } from '../../src/admission/features.ts';
import { keepWarm, rehearseDecisions } from '../../src/admission/rehearse.ts';
import type { EngineSnapshot } from '../../src/engine/snapshot.ts';

const DATA = 'results/admission/llama-tiny-1t-native';
const config = { mode: 'conformal', guarantee: 0.95, artifactPath: `${DATA}/e2e-gbdt.json`, calibrationTraces: `${DATA}/collect/round-2` } as const;

/** A warm engine running 2 requests, 1 waiting, 900 prompt tokens of work queued. */
const snapshot = {
  numSteps: 100, atMs: 1000, numWaiting: 1, numRunning: 2, numFreeSeqIds: 14, maxSequences: 16, numBlocks: 512, numFreeBlocks: 400, blockSize: 16,
  waitingPromptTokens: 900, runningPromptTokens: 0, remainingDecodeTokens: 300,
  promptWorkByDeadline: [{ deadlineMs: 3000, cumulativeTokens: 400 }, { deadlineMs: 6000, cumulativeTokens: 900 }],
  avgStepMs: 4, longStepMs: 5, prefillTokensPerS: 3000, decodeTokensPerS: 250, outputTokensP90: null,
} as unknown as EngineSnapshot;

test('rehearsal: leaves the controller untouched, decides as it would, and covers the branches', () => {
  const served = createAdmissionController(config);
  const untouched = createAdmissionController(config);
  const before = JSON.stringify(served.state());
  const twin = rehearseDecisions(served, () => snapshot, { sloMs: 4000, nowMs: 1000 });
  assert.ok(twin !== null);
  assert.equal(JSON.stringify(served.state()), before);

  // The twin went through admits, refusals on the bound and the shortcut.
  const reasons = (twin.state() as { reasons: Record<string, number> }).reasons;
  assert.equal(Object.values(reasons).reduce((a, b) => a + b, 0), 2000);
  for (const r of ['fits', 'over_budget', 'headroom']) assert.ok((reasons[r] ?? 0) > 0, `no '${r}' in ${JSON.stringify(reasons)}`);

  // Afterwards the served controller decides exactly as one never rehearsed.
  const x = new Float64Array(NUM_FEATURES);
  for (const [sloMs, maxTokens] of [[4000, 64], [4000, 900], [500, 200], [60_000, 1000]] as const) {
    const ctx: AdmissionContext = { requestId: 'r', arrivalMs: 1000, sloMs, numPromptTokens: 300, numCachedTokens: 0, maxTokens, n: 1, numMessages: 2, ttftBudgetMs: null };
    const a = served.decide(ctx, snapshot, extractFeatures(ctx, snapshot, x));
    const b = untouched.decide(ctx, snapshot, extractFeatures(ctx, snapshot, x));
    assert.deepEqual(a, b);
  }
  assert.equal(JSON.stringify(served.state()), JSON.stringify(untouched.state()));
});

test('rehearsal: admission off has nothing to rehearse', () => {
  assert.equal(rehearseDecisions(createAdmissionController({ mode: 'off' }), () => snapshot, { sloMs: 4000, nowMs: 0 }), null);
});

test('keepWarm: decides on the twin every interval until stopped, and never touches the served controller', async () => {
  const served = createAdmissionController(config);
  const before = JSON.stringify(served.state());
  const twin = served.rehearsal!();
  const decisions = (): number => (twin.state() as { numDecisions: number }).numDecisions;
  const stop = keepWarm(twin, () => snapshot, { sloMs: 4000, now: () => 1000, everyMs: 2 });
  while (decisions() < 3) await new Promise((r) => setTimeout(r, 5));
  stop();
  const at = decisions();
  await new Promise((r) => setTimeout(r, 30));
  assert.equal(decisions(), at);
  assert.equal(JSON.stringify(served.state()), before);
});
