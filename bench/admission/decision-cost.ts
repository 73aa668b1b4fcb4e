// Cost of one admission decision on the request path: feature extraction from a snapshot plus the
// conformal controller's decide (GBDT artifact predict + calibrated bound + gate), per call.
//
//   node --import tsx bench/admission/decision-cost.ts [artifact.json]
//
// Default artifact: results/admission/mock/e2e-gbdt.json. Reports median and p99 over 200,000 calls
// (each timed alone with performance.now(), whose own cost is printed beside).
import { createAdmissionController } from '../../src/admission/factory.ts';
import type { AdmissionContext } from '../../src/admission/controller.ts';
import { NUM_FEATURES, extractFeatures } from '../../src/admission/features.ts';
import type { EngineSnapshot } from '../../src/engine/snapshot.ts';
import { Rng } from '../../src/util/rng.ts';

const artifact = process.argv[2] ?? 'results/admission/mock/e2e-gbdt.json';
const controller = createAdmissionController({ mode: 'conformal', guarantee: 0.95, artifactPath: artifact, calibrationTraces: 'results/admission/mock/collect/round-2' });
const rng = new Rng(1);
const snapshots: EngineSnapshot[] = Array.from({ length: 64 }, () => {
  const work = Array.from({ length: rng.int(200) }, (_, i) => ({ deadlineMs: 1000 + i * 50, cumulativeTokens: (i + 1) * 300 }));
  return {
    numSteps: 1000, atMs: 1000, numWaiting: rng.int(100), numRunning: rng.int(16), numFreeSeqIds: rng.int(16), maxSequences: 16, numBlocks: 512, numFreeBlocks: rng.int(512), blockSize: 16,
    waitingPromptTokens: rng.int(50_000), runningPromptTokens: rng.int(4000), remainingDecodeTokens: rng.int(8000), promptWorkByDeadline: work,
    avgStepMs: 20 + rng.uniform() * 30, longStepMs: 30, prefillTokensPerS: 2000, decodeTokensPerS: 300, outputTokensP90: null, scheduler: {} as EngineSnapshot['scheduler'],
  };
});
const features = new Float64Array(NUM_FEATURES);
const times = new Float64Array(200_000);
let timer = 0;
for (let i = 0; i < times.length; i++) {
  const ctx: AdmissionContext = { requestId: 'r', arrivalMs: 1000, sloMs: 4000, numPromptTokens: 100 + (i % 900), numCachedTokens: i % 64, maxTokens: 16 + (i % 500), n: 1, numMessages: 2, ttftBudgetMs: null };
  const s = snapshots[i % snapshots.length]!;
  const t0 = performance.now();
  controller.decide(ctx, s, extractFeatures(ctx, s, features));
  times[i] = performance.now() - t0;
  const t1 = performance.now();
  timer += performance.now() - t1;
}
const sorted = [...times.subarray(10_000)].sort((a, b) => a - b);
const q = (p: number): number => sorted[Math.floor(p * (sorted.length - 1))]! * 1000;
console.log(`decision (features + decide), ${sorted.length} calls after 10,000 warm-up: median ${q(0.5).toFixed(2)} µs, p99 ${q(0.99).toFixed(2)} µs, max ${q(1).toFixed(1)} µs; timer alone ${((timer / times.length) * 1000).toFixed(3)} µs`);
