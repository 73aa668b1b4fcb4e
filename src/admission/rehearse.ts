// Rehearse the admission decision before serving. A fresh process decides its first requests in
// V8's interpreter: measured (bench/admission/decision-path.ts), the first decision took ~0.8 ms
// and the third ~0.3 ms, against ~30 µs once compiled — and with a few hundred decisions per run,
// those few were the decision-time p99. So the server decides a few thousand made-up requests on
// the controller's throwaway twin (controller.ts, `rehearsal`), over the real engine snapshot and
// the real feature extractor, before /ready turns green. The made-up requests span the decision's
// branches: budgets far too small (refused, with the Retry-After and message built), ample (fits),
// and in between (the under-capacity shortcut's arithmetic), with and without a TTFT budget.
// Nothing the server keeps is touched: not the controller's counters, quotas, regimes or models.

import type { EngineSnapshot } from '../engine/snapshot.ts';
import type { AdmissionContext, AdmissionController } from './controller.ts';
import type { AdmissionConfig } from './factory.ts';
import { NUM_FEATURES, extractFeatures } from './features.ts';

/** Enough calls for V8 to compile the path with its optimising tier; about 10–20 ms on this machine. */
export const REHEARSALS = 2000;

/** Decide `count` made-up requests on the controller's twin; returns the twin (null: nothing to rehearse). */
export function rehearseDecisions(controller: AdmissionController, snapshot: () => EngineSnapshot | null, o: { readonly sloMs: number; readonly nowMs: number; readonly count?: number }): AdmissionController | null {
  const twin = controller.rehearsal?.();
  if (twin === undefined) return null;
  const count = o.count ?? REHEARSALS;
  const budgets = [1, o.sloMs / 4, o.sloMs, 100 * o.sloMs];
  const x = new Float64Array(NUM_FEATURES);
  for (let i = 0; i < count; i++) {
    const numPromptTokens = 1 + ((i * 37) % 2048);
    const ctx: AdmissionContext = {
      requestId: 'rehearsal',
      arrivalMs: o.nowMs,
      sloMs: budgets[i % budgets.length]!,
      numPromptTokens,
      numCachedTokens: i % 5 === 0 ? numPromptTokens >> 1 : 0,
      maxTokens: 1 + ((i * 13) % 1024),
      n: 1 + (i % 7 === 0 ? 1 : 0),
      numMessages: 1 + (i % 3),
      ttftBudgetMs: i % 4 === 1 ? budgets[(i >> 2) % budgets.length]! : null,
    };
    const s = snapshot();
    twin.decide(ctx, s, twin.needsFeatures ? extractFeatures(ctx, s, x) : x);
  }
  return twin;
}

/**
 * Keep the decision path in cache: decide one made-up request (a typical chat turn) on `twin` every
 * `everyMs`, over the engine's current snapshot. Measured on the llama runner at 0.8 req/s (see
 * docs/admission.md, "Cost of a decision"): between two arrivals the engine's steps stream the model's
 * weights through the shared cache and the next decision finds its model, calibration window and code
 * in DRAM. Returns the function that stops it; the timer never keeps the process alive.
 */
export function keepWarm(twin: AdmissionController, snapshot: () => EngineSnapshot | null, o: { readonly sloMs: number; readonly now: () => number; readonly everyMs: number }): () => void {
  const x = new Float64Array(NUM_FEATURES);
  const timer = setInterval(() => {
    const ctx: AdmissionContext = { requestId: 'keep-warm', arrivalMs: o.now(), sloMs: o.sloMs, numPromptTokens: 256, numCachedTokens: 0, maxTokens: 128, n: 1, numMessages: 2, ttftBudgetMs: null };
    const s = snapshot();
    twin.decide(ctx, s, twin.needsFeatures ? extractFeatures(ctx, s, x) : x);
  }, o.everyMs);
  timer.unref();
  return () => clearInterval(timer);
}

/**
 * What a server does before /ready: rehearse the decision on the controller's twin, then keep it
 * warm every `keepWarmMs` of the configuration (an injected controller, or none, is not kept warm).
 * `snapshot(fresh)` is the server's view (an engine's, or a gateway's books). Returns the function
 * that stops the keep-warm timer.
 */
export function prepareDecisions(controller: AdmissionController, config: AdmissionConfig | AdmissionController | undefined, o: { readonly sloMs: number; readonly now: () => number; readonly snapshot: (fresh: boolean) => EngineSnapshot | null }): () => void {
  const twin = rehearseDecisions(controller, () => o.snapshot(true), { sloMs: o.sloMs, nowMs: o.now() });
  const everyMs = config === undefined || 'decide' in config ? 0 : (config.keepWarmMs ?? 0);
  if (twin === null || everyMs <= 0) return () => undefined;
  return keepWarm(twin, () => o.snapshot(false), { sloMs: o.sloMs, now: o.now, everyMs });
}
