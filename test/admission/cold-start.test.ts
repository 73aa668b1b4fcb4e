// The cold start: before the bound has its small-n guard of outcomes, the controller admits what the
// throughput arithmetic says fits and refuses the rest (beyond the exploration quota on an idle engine) — a fresh server
// under overload must not admit everything (it did: every admitted request timed out, no outcome
// ever came back, and the bound never calibrated).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createAdmissionController } from '../../src/admission/factory.ts';
import { ColdStartMargin } from '../../src/admission/decision/cold-start.ts';
import type { AdmissionContext } from '../../src/admission/controller.ts';
import { warmFeatures as features } from '../helpers/admission-features.ts';
import type { EngineSnapshot } from '../../src/engine/snapshot.ts';

const ctx = (arrivalMs: number): AdmissionContext => ({ requestId: 'r', arrivalMs, sloMs: 4000, numPromptTokens: 200, numCachedTokens: 0, maxTokens: 100, n: 1, numMessages: 1, ttftBudgetMs: null });
const busy = { maxSequences: 16, numRunning: 2, numWaiting: 10, waitingPromptTokens: 20_000, runningPromptTokens: 0, remainingDecodeTokens: 500, avgStepMs: 10, prefillTokensPerS: 2000, decodeTokensPerS: 200 } as EngineSnapshot;

test('uncalibrated: admits what the arithmetic fits, refuses the rest past the exploration quota, with Retry-After', () => {
  const c = createAdmissionController({ mode: 'conformal', guarantee: 0.95 });
  // 2 × (200 / 2000 s + 100 × 10 ms) = 2.2 s ≤ 4 s.
  const light = c.decide(ctx(0), busy, features({}));
  assert.equal(light.admit, true);
  assert.equal(light.reason, 'cold_start');
  // 20,200 prompt tokens ahead and its own: 2 × (10.1 s + 1 s) > 4 s. On a busy engine the exploration
  // quota does not override the arithmetic (its grants there missed 23% on long prompts at 4x): all refused.
  const heavy = features({ waiting: 10, prompt_work_ahead: 20_000 });
  const verdicts = Array.from({ length: 10 }, (_, i) => c.decide(ctx(1 + i), busy, heavy));
  assert.deepEqual(verdicts.map((d) => d.admit), Array(10).fill(false));
  const refused = verdicts.at(-1)!;
  assert.equal(refused.reason, 'uncalibrated');
  assert.ok(!refused.admit && (refused.refusal.retryAfterS ?? 0) >= 1);
  assert.match(refused.refusal.message, /still calibrating/);
  // More requests than sequence slots but little work ahead (FIFO runs one at a time): the arithmetic fits.
  assert.equal(c.decide(ctx(20), { ...busy, maxSequences: 1 }, features({ running: 1, waiting: 7, prompt_work_ahead: 300 })).admit, true);
});

test('uncalibrated on an engine whose rates are unmeasured: admits (nothing better is known)', () => {
  const c = createAdmissionController({ mode: 'conformal', guarantee: 0.95 });
  const cold = { ...busy, decodeTokensPerS: null } as EngineSnapshot;
  for (let i = 0; i < 10; i++) assert.equal(c.decide(ctx(i), cold, features({ waiting: 10, prompt_work_ahead: 20_000 })).admit, true);
});

test('fits(): the bound alone, uncalibrated by the arithmetic; changes no state (the quota is untouched)', () => {
  const c = createAdmissionController({ mode: 'conformal', guarantee: 0.95 });
  const heavy = features({ waiting: 10, prompt_work_ahead: 20_000 });
  const before = JSON.stringify(c.state());
  assert.equal(c.fits!(ctx(0), busy, features({})), true);
  for (let i = 0; i < 20; i++) assert.equal(c.fits!(ctx(i), busy, heavy), false);
  assert.equal(JSON.stringify(c.state()), before, 'fits() changed the controller');
  // The exploration quota is still whole: on an idle engine decide() admits the next 4 the arithmetic refuses
  // (1,000 tokens at 10 ms, ×2: 20 s > 4 s), then no more.
  const idle = { ...busy, numRunning: 0, numWaiting: 0, waitingPromptTokens: 0, remainingDecodeTokens: 0 } as EngineSnapshot;
  const long = features({ running: 0, max_tokens: 1000 });
  assert.equal(c.fits!(ctx(29), idle, long), false);
  const explored = Array.from({ length: 5 }, (_, i) => c.decide(ctx(30 + i), idle, long));
  assert.deepEqual(explored.map((d) => [d.admit, d.reason]), [[true, 'explore'], [true, 'explore'], [true, 'explore'], [true, 'explore'], [false, 'uncalibrated']]);
});

test('a budget below the request\'s own prefill plus one decode step is refused on an idle engine, calibrated or not, quota free', () => {
  const idle = { ...busy, numRunning: 0, numWaiting: 0, waitingPromptTokens: 0, remainingDecodeTokens: 0 } as EngineSnapshot;
  // Its own floor: 200 tokens at 2,000 tok/s = 100 ms, + one 10 ms step = 110 ms.
  const x = features({ running: 0, max_tokens: 1000 });
  const at = (sloMs: number, ttftBudgetMs: number | null = null, arrivalMs = 0): AdmissionContext => ({ ...ctx(arrivalMs), sloMs, ttftBudgetMs, maxTokens: 1000 });
  const c = createAdmissionController({ mode: 'conformal', guarantee: 0.95 });
  const refused = c.decide(at(105), idle, x);
  assert.equal(refused.admit, false);
  assert.equal(refused.reason, 'below_floor');
  assert.ok(!refused.admit && (refused.refusal.retryAfterS ?? 0) >= 1);
  assert.match(refused.refusal.message, /budget of 105 ms .* below .* prefill and one decode step .*\(110 ms\)/);
  assert.equal(c.fits!(at(105), idle, x), false);
  // Just above its floor, an idle engine's exploration still admits it (its length is not known: EOS may come at once).
  assert.equal(c.decide(at(111, null, 1), idle, x).reason, 'explore');
  // A TTFT budget below its own prefill alone.
  const ttft = c.decide(at(4000, 90, 2), idle, features({ running: 0 }));
  assert.equal(ttft.reason, 'below_floor');
  assert.ok(!ttft.admit && /time to first token/.test(ttft.refusal.message));
  // The quota was not spent on the refusals: 3 more explorations fit in this window (4 per 10 s).
  assert.deepEqual(Array.from({ length: 4 }, (_, i) => c.decide(at(111, null, 3 + i), idle, x).admit), [true, true, true, false]);
  // (c has the headroom shortcut on, as by default: its arithmetic is never below the floor.) Without it, the same.
  const h = createAdmissionController({ mode: 'conformal', guarantee: 0.95, headroom: false });
  assert.equal(h.decide(at(105), idle, x).reason, 'below_floor');
  // Rates unmeasured: no floor is known, nothing is refused for it.
  assert.equal(c.decide(at(105, null, 10_000), { ...idle, decodeTokensPerS: null }, features({ running: 0, step_ms_avg: 0, prefill_tokens_per_s: 0, decode_tokens_per_s: 0 })).admit, true);
});

test('the cold-start factor: 2 until the conformal rank exists, then the rank-th smallest of the newest scores (ratios, with no prefill part); a cut past its budget is +∞', () => {
  const m = new ColdStartMargin(0.05);
  assert.deepEqual(m.state(), { margin: 2, learned: false, n: 0, minN: 19, halfMargin: null });
  // 18 ratios 0.1..1.8: one short of ⌈(n+1)·0.95⌉ ≤ n.
  for (let i = 1; i <= 18; i++) m.observe(1000, 100 * i, false, 4000);
  assert.equal(m.state().margin, 2);
  assert.equal(m.fits(2000, 4000), true, 'the fixed factor: 2 × 2 s ≤ 4 s');
  m.observe(1000, 1900, false, 4000);
  // n = 19: rank ⌈20 × 0.95⌉ = 19, the largest.
  assert.deepEqual(m.state(), { margin: 1.9, learned: true, n: 19, minN: 19, halfMargin: null });
  // No estimate (rates unmeasured at its decision): nothing learned.
  m.observe(null, 99_000, false, 4000);
  assert.equal(m.state().n, 19);
  // Cut before its budget: its ratio at the cut, a lower bound. Cut past it: a miss, +∞.
  m.observe(1000, 50, true, 4000);
  assert.equal(m.state().n, 20);
  m.observe(1000, 4500, true, 4000);
  assert.equal(m.state().margin, Infinity, 'n = 21: rank 21, the +∞ of the cut past its budget');
  assert.equal(m.fits(1, 4000), false);
  // The window keeps the newest 100: after 100 ratios of 0.5 the old ones are gone.
  for (let i = 0; i < 100; i++) m.observe(2000, 1000, false, 4000);
  assert.deepEqual(m.state(), { margin: 0.5, learned: true, n: 100, minN: 19, halfMargin: 0.5 });
  assert.equal(m.fits(8000, 4000), true, '0.5 × 8 s ≤ 4 s');
  // A tiny estimate is floored at a quarter of the budget, in the score and in the decision: a 10 ms
  // one-token request that took 300 ms scores 0.3, not 30 (which set the factor for everything).
  const t = new ColdStartMargin(0.05);
  for (let i = 0; i < 19; i++) t.observe(10, 300, false, 4000);
  assert.equal(t.state().margin, 0.3);
  assert.equal(t.fits(10, 4000), true);
  assert.equal(t.fits(13_000, 4000), true, '0.3 × 13 s = 3.9 s');
  assert.equal(t.fits(14_000, 4000), false);
  // A 99% guarantee needs 99 scores before it learns anything.
  assert.equal(new ColdStartMargin(0.01).state().minN, 99);
});

test('the learned factor multiplies the decode part only: prefill + q · max(decode, B/4)', () => {
  // Learned on decode-heavy outcomes (no prefill part): each took 1.25× its estimate.
  const m = new ColdStartMargin(0.05);
  for (let i = 0; i < 19; i++) m.observe(1000, 1250, false, 4000, 0);
  assert.equal(m.state().margin, 1.25);
  // A long prompt: 1.62 s of prefill, 1.71 s of planned decode. One factor on the whole 3.33 s
  // would refuse it (4.16 s); on the decode part it fits (1.62 + 1.25 × 1.71 = 3.76 s).
  assert.equal(m.fits(3330, 4000, 1620), true);
  assert.equal(m.fits(3330, 4000, 0), false, 'with no prefill part, the old ratio rule');
  // The decode part is what grows: 0.5 s of prefill and 2.9 s of decode is 4.125 s.
  assert.equal(m.fits(3400, 4000, 500), false);
  // Scores are the latency past the prefill part over the decode part: (2.5 − 1) / 2 = 0.75.
  const s = new ColdStartMargin(0.05);
  for (let i = 0; i < 19; i++) s.observe(3000, 2500, false, 4000, 1000);
  assert.equal(s.state().margin, 0.75);
  // A prefill part past the estimate (a rounding) is read as the whole estimate, the floor holding the decode part.
  assert.equal(s.fits(1000, 4000, 5000), true, '1 s + 0.75 × 1 s');
  assert.equal(s.halfBound(1000, 4000, 5000), null);
});

test('uncalibrated: the factor learned from admitted outcomes replaces the fixed 2, both ways', () => {
  // est = 200 / 2000 s + 250 × 10 ms = 2.6 s: ×2 = 5.2 s > 4 s, refused (a busy engine: no exploration).
  const x = features({ max_tokens: 250 });
  const teach = (c: ReturnType<typeof createAdmissionController>, ratio: number, n: number): void => {
    const light = features({});
    for (let i = 0; i < n; i++) {
      const d = c.decide(ctx(100_000 + i * 1000), busy, light);
      assert.equal(d.admit, true);
      assert.equal(d.memo!.coldEstimateMs, 1100, 'the unmargined estimate is kept for the outcome');
      assert.equal(d.memo!.coldPrefillMs, 100, 'and its prefill part');
      // Its 100 ms of prefill, then `ratio` times its 1 s of planned decode.
      c.observe(light, d, { e2eMs: 100 + ratio * 1000, ttftMs: 50, censored: false });
    }
  };
  const fast = createAdmissionController({ mode: 'conformal', guarantee: 0.95, headroom: false });
  assert.equal(fast.decide(ctx(5), busy, x).reason, 'uncalibrated');
  // Decode at 1.2× the estimate's: 0.1 s + 1.2 × 2.5 s = 3.1 s fits.
  teach(fast, 1.2, 19);
  const d = fast.decide(ctx(200_005), busy, x);
  assert.deepEqual([d.admit, d.reason], [true, 'cold_start']);
  assert.equal(fast.fits!(ctx(200_006), busy, x), true);
  assert.ok(Math.abs((fast.state() as { e2e: { coldStart: { margin: number } } }).e2e.coldStart.margin - 1.2) < 1e-9);
  // Decode at 3× the estimate's: the light request still fits (0.1 + 3 × 1 = 3.1 s); a 150-token one,
  // which ×2 admitted (1.6 s × 2 = 3.2 s), does not (0.1 + 3 × 1.5 = 4.6 s).
  const slow = createAdmissionController({ mode: 'conformal', guarantee: 0.95, headroom: false });
  const mid = features({ max_tokens: 150 });
  assert.equal(slow.fits!(ctx(0), busy, mid), true);
  teach(slow, 3, 19);
  assert.equal(slow.fits!(ctx(300_000), busy, mid), false);
  assert.equal(slow.fits!(ctx(300_001), busy, features({})), true);
});

test('--admission-arithmetic-bound: the lesser of the learned bound and the arithmetic one, each at half the miscoverage', () => {
  const m = new ColdStartMargin(0.05);
  for (let i = 1; i <= 38; i++) m.observe(1000, 10 * i, false, 4000);
  assert.equal(m.state().halfMargin, null, 'rank ⌈(n+1)·0.975⌉ ≤ n needs n ≥ 39');
  assert.equal(m.halfBound(2000, 4000), null);
  m.observe(1000, 390, false, 4000);
  assert.equal(m.state().halfMargin, 0.39);
  assert.equal(m.halfBound(2000, 4000), 780);
  assert.equal(m.halfBound(10, 4000), 390, 'floored at a quarter of the budget');

  // Latency is the arithmetic exactly (prefill + 100 steps at a step time the learned baseline does not read).
  const stepOf = (i: number): number => 2 + (i % 10) * 4;
  const teach = (c: ReturnType<typeof createAdmissionController>): void => {
    for (let i = 0; i < 150; i++) {
      const x = features({ step_ms_avg: stepOf(i) });
      const d = c.decide(ctx(i * 1000), busy, x);
      c.observe(x, d, { e2eMs: 100 + 100 * stepOf(i), ttftMs: 100, censored: false });
    }
  };
  const at = (sloMs: number): AdmissionContext => ({ ...ctx(1_000_000), sloMs });
  const quick = features({ step_ms_avg: 2 });
  const both = createAdmissionController({ mode: 'conformal', guarantee: 0.95, headroom: false, arithmeticBound: true });
  const learnedOnly = createAdmissionController({ mode: 'conformal', guarantee: 0.95, headroom: false });
  teach(both);
  teach(learnedOnly);
  type S = { e2e: { calibration: { status: string; alpha: number }; coldStart: { halfMargin: number } } };
  assert.equal((both.state() as S).e2e.calibration.status, 'calibrated');
  assert.ok(Math.abs((both.state() as S).e2e.calibration.alpha - 0.025) < 1e-9, 'the learned bound at half the miscoverage');
  assert.ok(Math.abs((learnedOnly.state() as S).e2e.calibration.alpha - 0.05) < 1e-9);
  // The learned bound cannot see the step time: it bounds every request near the slowest; the arithmetic sees it.
  const alone = learnedOnly.decide(at(2000), busy, quick);
  assert.equal(alone.admit, false);
  assert.ok(alone.boundMs! > 2000, `learned bound ${alone.boundMs}`);
  const d = both.decide(at(2000), busy, quick);
  assert.deepEqual([d.admit, d.reason], [true, 'fits']);
  // 100 ms of prefill, then 200 ms of decode floored at 500 (a quarter of 2 s) times the factor at α/2 (1: the latencies were the arithmetic).
  assert.equal(d.boundMs, 100 + 500 * (both.state() as S).e2e.coldStart.halfMargin);
});
