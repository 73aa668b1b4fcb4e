// The under-capacity shortcut: the rule reads only admission-time facts and admits only with room
// to spare; its own miss rate switches it off (with one probe per interval as the way back); and
// through the controller it admits what a loose bound refuses, but only while the engine has room.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { BoundModel } from '../../../src/admission/bound-model.ts';
import { ConformalController, metBudgets } from '../../../src/admission/conformal-controller.ts';
import { createOnlineCalibrator } from '../../../src/admission/conformal/online-calibrator.ts';
import { ratioScore } from '../../../src/admission/conformal/score.ts';
import type { AdmissionContext, DecisionMemo } from '../../../src/admission/controller.ts';
import { Headroom } from '../../../src/admission/decision/headroom.ts';
import { FEATURE_NAMES, NUM_FEATURES, type FeatureName } from '../../../src/admission/features.ts';
import { toPredictor } from '../../../src/admission/predictor/predictor.ts';
import type { EngineSnapshot } from '../../../src/engine/snapshot.ts';

const SEED = 20261130;
const VIEW = { maxSequences: 16 };

/** A warm, empty engine and a 200-token prompt asking for 100 tokens: 200/2000 s + 100 × 10 ms = 1.1 s, ×1.5 = 1.65 s. */
function features(over: Partial<Record<FeatureName, number>> = {}): Float64Array {
  const base: Partial<Record<FeatureName, number>> = {
    prompt_tokens: 200,
    new_prefill_tokens: 200,
    max_tokens: 100,
    choices: 1,
    messages: 1,
    prompt_work_ahead: 0,
    waiting: 0,
    running: 1,
    free_kv_fraction: 0.9,
    step_ms_avg: 10,
    prefill_tokens_per_s: 2000,
    decode_tokens_per_s: 100,
  };
  const all = { ...base, ...over };
  return Float64Array.from(FEATURE_NAMES, (n) => all[n] ?? 0);
}

describe('Headroom rule', () => {
  const h = new Headroom({ alpha: 0.05 });

  it('estimates prefill + max_tokens steps, times the margin', () => {
    const e = h.estimate(features(), VIEW)!;
    assert.ok(Math.abs(e.e2eMs - 1650) < 1e-9, String(e.e2eMs));
    assert.ok(Math.abs(e.ttftMs - 150) < 1e-9, String(e.ttftMs));
  });

  it('admits only a warm engine with nothing queued, a small batch, and an estimate inside every budget', () => {
    assert.equal(h.decide(features(), VIEW, 2000, null, 0), 'admit');
    assert.equal(h.decide(features(), VIEW, 1600, null, 0), 'no_room', 'estimate over the E2E budget');
    assert.equal(h.decide(features(), VIEW, 2000, 140, 0), 'no_room', 'prefill estimate over the TTFT budget');
    assert.equal(h.decide(features(), VIEW, 2000, 200, 0), 'admit');
    assert.equal(h.decide(features({ waiting: 1 }), VIEW, 60_000, null, 0), 'no_room', 'a queue');
    assert.equal(h.decide(features({ prompt_work_ahead: 10 }), VIEW, 60_000, null, 0), 'no_room', 'prompt work ahead');
    assert.equal(h.decide(features({ running: 3 }), VIEW, 60_000, null, 0), 'admit', '3 + 1 ≤ 16/4');
    assert.equal(h.decide(features({ running: 4 }), VIEW, 60_000, null, 0), 'no_room', '4 + 1 > 16/4');
    assert.equal(h.decide(features({ running: 2, choices: 3 }), VIEW, 60_000, null, 0), 'no_room', 'n counts as running');
    assert.equal(h.decide(features({ free_kv_fraction: 0.2 }), VIEW, 2000, null, 0), 'admit', 'cached blocks count as used: KV is not read');
    assert.equal(h.decide(features({ step_ms_avg: 0, decode_tokens_per_s: 0 }), VIEW, 60_000, null, 0), 'no_room', 'cold engine');
    assert.equal(h.decide(features(), null, 60_000, null, 0), 'no_room', 'no engine view');
  });

  it('prices the decode at the larger of the recent and the long step time', () => {
    // 200/2000 s + 100 × 30 ms = 3.1 s, × 1.5 = 4.65 s: a 4 s budget no longer fits.
    const e = h.estimate(features(), { maxSequences: 16, longStepMs: 30 })!;
    assert.ok(Math.abs(e.e2eMs - 4650) < 1e-9, String(e.e2eMs));
    assert.equal(h.decide(features(), { maxSequences: 16, longStepMs: 30 }, 4000, null, 0), 'no_room');
    assert.equal(h.decide(features(), { maxSequences: 16, longStepMs: 5 }, 4000, null, 0), 'admit', 'a shorter long average: the recent 10 ms');
    assert.equal(h.decide(features(), { maxSequences: 16, longStepMs: null }, 4000, null, 0), 'admit');
  });

  it('with a step-time table, prices the decode at the step time of the batch it joins, not the averages', () => {
    // Index b − 1: a step decoding b sequences. Running 1 + this request: batch 2, 4 ms.
    const table = Float64Array.from([2, 4, 6, 8]);
    const e = h.estimate(features(), { maxSequences: 16, longStepMs: 30, stepMsByBatch: table })!;
    // 200/2000 s + 100 × 4 ms = 0.5 s, × 1.5 = 0.75 s: the long average's overload memory (30 ms) is not read.
    assert.ok(Math.abs(e.e2eMs - 750) < 1e-9, String(e.e2eMs));
    // Running 2, waiting 1, 1 choice: batch 4, 8 ms.
    const q = new Headroom({ alpha: 0.05, allowQueue: true });
    const eq = q.estimate(features({ running: 2, waiting: 1 }), { maxSequences: 16, stepMsByBatch: table })!;
    assert.ok(Math.abs(eq.e2eMs - 1.5 * (100 + 800)) < 1e-9, String(eq.e2eMs));
    // An idle engine after an overload: batch 1 at 2 ms fits where the averages (30 ms) do not.
    assert.equal(h.decide(features({ running: 0 }), { maxSequences: 16, longStepMs: 30, stepMsByBatch: table }, 4000, null, 0), 'admit');
    assert.equal(h.decide(features({ running: 0 }), { maxSequences: 16, longStepMs: 30 }, 4000, null, 0), 'no_room');
    // In a lull: running 1 now, but the engine decoded 3.4 on average lately: batch 4, 8 ms.
    const lull = h.estimate(features(), { maxSequences: 16, stepMsByBatch: table, recentDecodeBatch: 3.4 })!;
    assert.ok(Math.abs(lull.e2eMs - 1.5 * (100 + 800)) < 1e-9, String(lull.e2eMs));
  });

  it('with allowQueue, reads the queue: waiting requests join the batch, the work ahead joins the prefill', () => {
    const q = new Headroom({ alpha: 0.05, allowQueue: true });
    const e = q.estimate(features({ waiting: 1, prompt_work_ahead: 600 }), VIEW)!;
    // (600 + 200) / 2000 s + 100 × 10 ms = 1.4 s, × 1.5.
    assert.ok(Math.abs(e.e2eMs - 2100) < 1e-9, String(e.e2eMs));
    assert.ok(Math.abs(e.ttftMs - 600) < 1e-9, String(e.ttftMs));
    assert.equal(q.decide(features({ waiting: 1, prompt_work_ahead: 600 }), VIEW, 2100, null, 0), 'admit');
    assert.equal(q.decide(features({ waiting: 1, prompt_work_ahead: 600 }), VIEW, 2099, null, 0), 'no_room', 'the work ahead pushes it over');
    assert.equal(q.decide(features({ running: 2, waiting: 1 }), VIEW, 60_000, null, 0), 'admit', '2 + 1 + 1 ≤ 16/4');
    assert.equal(q.decide(features({ running: 2, waiting: 2 }), VIEW, 60_000, null, 0), 'no_room', 'the waiting count against the batch cap');
    assert.equal(h.decide(features({ running: 2, waiting: 1 }), VIEW, 60_000, null, 0), 'no_room', 'without allowQueue a queue refuses');
  });

  it('property: an admitted request always has its margin-inflated estimate inside its budget and an empty queue', () => {
    fc.assert(
      fc.property(
        fc.record({ np: fc.integer({ min: 0, max: 4000 }), mt: fc.integer({ min: 1, max: 1000 }), run: fc.integer({ min: 0, max: 16 }), wait: fc.integer({ min: 0, max: 3 }), step: fc.double({ min: 0, max: 100, noNaN: true }), budget: fc.integer({ min: 1, max: 20_000 }) }),
        ({ np, mt, run, wait, step, budget }) => {
          const x = features({ new_prefill_tokens: np, max_tokens: mt, running: run, waiting: wait, step_ms_avg: step });
          if (new Headroom({ alpha: 0.05 }).decide(x, VIEW, budget, null, 0) !== 'admit') return;
          assert.equal(wait, 0);
          assert.ok(run + 1 <= 4);
          assert.ok(1.5 * ((1000 * np) / 2000 + mt * step) <= budget);
        },
      ),
      { seed: SEED, numRuns: 500 },
    );
  });
});

describe('Headroom self-check', () => {
  it('switches off when its own misses exceed α, probes once per interval, and comes back as successes dilute the misses', () => {
    const h = new Headroom({ alpha: 0.1, window: 20, minOutcomes: 10, probeEveryMs: 1000 });
    for (let i = 0; i < 9; i++) h.observe(false);
    assert.equal(h.enabled, true, 'fewer than minOutcomes: no verdict yet');
    h.observe(false);
    assert.equal(h.enabled, false, '10 misses of 10');
    assert.equal(h.decide(features(), VIEW, 5000, null, 0), 'probe');
    assert.equal(h.decide(features(), VIEW, 5000, null, 500), 'off');
    assert.equal(h.decide(features(), VIEW, 5000, null, 1000), 'probe');
    assert.equal(h.decide(features({ waiting: 2 }), VIEW, 5000, null, 5000), 'no_room', 'a probe still needs room');
    for (let i = 0; i < 18; i++) h.observe(true);
    // Window of 20: the last 2 misses and 18 met → 10% ≤ α.
    assert.equal(h.enabled, true);
    assert.equal(h.decide(features(), VIEW, 5000, null, 5000), 'admit');
    for (let i = 0; i < 3; i++) h.observe(false);
    assert.equal(h.enabled, false, '3 misses of 20 > 10%');
  });

  it('property: enabled iff fewer than minOutcomes outcomes or the window miss share ≤ α', () => {
    fc.assert(
      fc.property(fc.array(fc.boolean(), { maxLength: 200 }), fc.integer({ min: 1, max: 50 }), (met, window) => {
        const minOutcomes = Math.min(window, 10);
        const h = new Headroom({ alpha: 0.05, window, minOutcomes });
        met.forEach((m) => h.observe(m));
        const last = met.slice(-window);
        const misses = last.filter((m) => !m).length;
        assert.equal(h.enabled, last.length < minOutcomes || misses <= 0.05 * last.length);
      }),
      { seed: SEED, numRuns: 300 },
    );
  });
});

describe('metBudgets', () => {
  const memo = (ttftBudgetMs: number | null): DecisionMemo => ({ e2ePredictionMs: 1, ttftPredictionMs: null, sloMs: 1000, ttftBudgetMs });
  it('reads a censored latency as a lower bound and an early abort as no evidence', () => {
    assert.equal(metBudgets(memo(null), { e2eMs: 900, ttftMs: 100, censored: false }), true);
    assert.equal(metBudgets(memo(null), { e2eMs: 1100, ttftMs: 100, censored: false }), false);
    assert.equal(metBudgets(memo(null), { e2eMs: 1100, ttftMs: 100, censored: true }), false, 'cut after the budget: a miss');
    assert.equal(metBudgets(memo(null), { e2eMs: 500, ttftMs: 100, censored: true }), null, 'cut before the budget: unknown');
    assert.equal(metBudgets(memo(50), { e2eMs: 900, ttftMs: 100, censored: false }), false, 'TTFT budget missed');
    assert.equal(metBudgets(memo(150), { e2eMs: 900, ttftMs: 100, censored: false }), true);
  });
});

describe('ConformalController with the headroom shortcut', () => {
  /** Bound = 10 s for everything (static calibration at exactly the prediction). */
  const controller = (headroom: Headroom | undefined): ConformalController => {
    const initial = Array.from({ length: 200 }, () => ({ yhat: 10_000, y: 10_000 }));
    const model = () => new BoundModel({ kind: 'artifact', predictor: toPredictor({ kind: 'constant', quantile: 0.9, value: 10_000, numFeatures: NUM_FEATURES }), description: 'constant' }, createOnlineCalibrator({ mode: 'static', score: ratioScore, alpha: 0.05, initial }));
    return new ConformalController({ alpha: 0.05, e2e: model(), ttft: model(), ...(headroom === undefined ? {} : { headroom }) });
  };
  const ctx = (arrivalMs: number): AdmissionContext => ({ requestId: 'r', arrivalMs, sloMs: 4000, numPromptTokens: 200, numCachedTokens: 0, maxTokens: 100, n: 1, numMessages: 1, ttftBudgetMs: null });
  const snap = { maxSequences: 16, numRunning: 1, numWaiting: 0, waitingPromptTokens: 0, runningPromptTokens: 0, remainingDecodeTokens: 50, avgStepMs: 10, prefillTokensPerS: 2000, decodeTokensPerS: 100 } as EngineSnapshot;

  it('admits what the bound refuses while the engine has room, refuses when it has none, and stops when its admissions miss', () => {
    const without = controller(undefined);
    assert.equal(without.decide(ctx(0), snap, features()).admit, false, 'a 10 s bound against a 4 s budget');
    const h = new Headroom({ alpha: 0.05, window: 20, minOutcomes: 20, probeEveryMs: 60_000 });
    const c = controller(h);
    const d = c.decide(ctx(0), snap, features());
    assert.equal(d.admit, true);
    assert.equal(d.reason, 'headroom');
    assert.equal(c.decide(ctx(1), snap, features({ waiting: 1 })).admit, false, 'a queue: no shortcut');
    // Its admissions come back late: the shortcut turns itself off.
    for (let i = 0; i < 20; i++) c.observe(features(), d, { e2eMs: 5000, ttftMs: 100, censored: false });
    assert.equal(h.enabled, false);
    const probe = c.decide(ctx(2), snap, features());
    assert.equal(probe.reason, 'headroom_probe');
    assert.equal(c.decide(ctx(3), snap, features()).admit, false, 'off, and the probe slot is taken');
    const state = c.state() as { reasons: Record<string, number>; headroom: { enabled: boolean; numOutcomes: number } };
    assert.equal(state.reasons['headroom'], 1);
    assert.equal(state.headroom.enabled, false);
    assert.equal(state.headroom.numOutcomes, 20);
  });

  it('decides requests out of their arrival order: the exploration quota counts them and nothing throws', () => {
    // An idle engine: the bound (10 s) is over the budget (4 s), so only exploration admits, 4 per 10 s.
    const idle = { ...snap, numRunning: 0 } as EngineSnapshot;
    const c = controller(undefined);
    // A request decided after one that arrived later (its body or tokenization took longer).
    const arrivals = [1000, 995, 1010, 990, 1020, 1005];
    const decisions = arrivals.map((t) => c.decide(ctx(t), idle, features()));
    assert.deepEqual(decisions.map((d) => d.reason), ['explore', 'explore', 'explore', 'explore', 'over_budget', 'over_budget']);
    assert.equal(c.decide(ctx(11_000), idle, features()).reason, 'explore', 'a window later the quota has room again');
  });

  it('a calibrated bound on an idle engine explores nothing whose budget is below its own prefill plus one step', () => {
    const idle = { ...snap, numRunning: 0 } as EngineSnapshot;
    const c = controller(new Headroom({ alpha: 0.05 }));
    // 200 tokens at 2,000 tok/s + one 10 ms step = 110 ms; the 10 s bound would go to exploration.
    const tight = { ...ctx(0), sloMs: 100 };
    const d = c.decide(tight, idle, features());
    assert.equal(d.reason, 'below_floor');
    assert.equal(Math.round(d.boundMs!), 10_000, 'the calibrated bound is still reported');
    assert.equal(c.decide({ ...tight, sloMs: 4000 }, idle, features()).reason, 'explore');
  });
});
