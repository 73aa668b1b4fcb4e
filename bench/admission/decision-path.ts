// The admission decision as the server takes it: the engine snapshot (rebuilt after every step and
// arrival), the feature vector, and the controller's verdict — each timed on its own, in a process
// whose engine is running (mock runner, N requests held), once per interval as arrivals would come.
// With --cold, a 64 MiB buffer is written between decisions, as the rest of a busy server's work
// would, so the decision meets cold caches (what the server's own histogram sees at a few requests/s).
//
//   node --import tsx bench/admission/decision-path.ts [artifact.json] [calibration-traces] [--held N] [--cold] [--decisions K]
//
// Prints median / p99 / max per part, µs.
import { parseArgs } from 'node:util';
import { createAdmissionController } from '../../src/admission/factory.ts';
import type { AdmissionContext } from '../../src/admission/controller.ts';
import { NUM_FEATURES, extractFeatures } from '../../src/admission/features.ts';
import { serverConfig } from '../../src/api/config.ts';
import { Headroom } from '../../src/app.ts';
import { MockRunner } from '../../src/engine/runner/mock/mock-runner.ts';

const { values, positionals } = parseArgs({ allowPositionals: true, options: { held: { type: 'string', default: '16' }, cold: { type: 'boolean', default: false }, decisions: { type: 'string', default: '400' } } });
const artifact = positionals[0] ?? 'results/admission/mock/e2e-gbdt.json';
const traces = positionals[1] ?? 'results/admission/mock/collect/round-2';
const numHeld = Number(values.held);
const numDecisions = Number(values.decisions);

const controller = createAdmissionController({ mode: 'conformal', guarantee: 0.95, artifactPath: artifact, calibrationTraces: traces });
const headroom = new Headroom({
  runner: new MockRunner({ cost: { speed: 1 } }),
  server: serverConfig({ host: '127.0.0.1', port: 0, logLevel: 'silent' }),
  scheduler: { scheduler: 'continuous' },
  maxQueuedRequests: 1024,
});
const url = await headroom.start();
const body = JSON.stringify({ model: 'headroom-mock', prompt: 'a long enough prompt to keep the engine busy '.repeat(20), max_tokens: 1000 });
const pending = Array.from({ length: numHeld }, () => fetch(`${url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-slo-ms': '3600000' }, body }).catch(() => null));
while (headroom.engine.numUnfinished < numHeld) await new Promise((r) => setTimeout(r, 5));

const evict = new Float64Array(8 << 20);
const parts = { snapshot: [] as number[], features: [] as number[], decide: [] as number[], whole: [] as number[] };
const features = new Float64Array(NUM_FEATURES);
for (let i = 0; i < numDecisions; i++) {
  await new Promise((r) => setTimeout(r, 5)); // engine steps run in between: the snapshot is stale again
  if (values.cold) for (let j = 0; j < evict.length; j += 8) evict[j] = i + j;
  const ctx: AdmissionContext = { requestId: 'r', arrivalMs: performance.now(), sloMs: 4000, numPromptTokens: 100 + (i % 900), numCachedTokens: 0, maxTokens: 16 + (i % 500), n: 1, numMessages: 2, ttftBudgetMs: null };
  const t0 = performance.now();
  const snap = headroom.engine.snapshot();
  const t1 = performance.now();
  extractFeatures(ctx, snap, features);
  const t2 = performance.now();
  controller.decide(ctx, snap, features);
  const t3 = performance.now();
  parts.snapshot.push(t1 - t0);
  parts.features.push(t2 - t1);
  parts.decide.push(t3 - t2);
  parts.whole.push(t3 - t0);
}
const q = (xs: number[], p: number): number => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(p * xs.length))]! * 1000;
console.log(`${numDecisions} decisions, ${numHeld} requests held, ${values.cold ? 'caches evicted between decisions' : 'no eviction'}; µs`);
for (const [name, xs] of Object.entries(parts)) console.log(`${name.padEnd(9)} median ${q(xs, 0.5).toFixed(1).padStart(7)}  p99 ${q(xs, 0.99).toFixed(1).padStart(7)}  max ${q(xs, 1).toFixed(1).padStart(8)}`);
await headroom.close();
await Promise.all(pending);
