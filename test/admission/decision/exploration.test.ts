import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { createOnlineCalibrator } from '../../../src/admission/conformal/online-calibrator.ts';
import { ratioScore } from '../../../src/admission/conformal/score.ts';
import { ExplorationQuota, explorationReason, type ExplorationView } from '../../../src/admission/decision/exploration.ts';
import { AdmissionGate } from '../../../src/admission/decision/gate.ts';
import { Rng } from '../../../src/util/rng.ts';

const SEED = 20261130;
const IDLE: ExplorationView = { numRunning: 0, numWaiting: 0, decodeTokensPerS: 500 };
const BUSY: ExplorationView = { numRunning: 6, numWaiting: 3, decodeTokensPerS: 500 };
const COLD: ExplorationView = { numRunning: 0, numWaiting: 0, decodeTokensPerS: null };

describe('ExplorationQuota', () => {
  it('grants at most quota per sliding window', () => {
    const q = new ExplorationQuota({ quota: 2, windowMs: 1000 });
    assert.deepEqual([0, 1, 2, 999, 1000, 1001, 1002].map((t) => q.tryTake(t)), [true, true, false, false, true, true, false]);
    assert.equal(q.numGrants, 4);
    assert.throws(() => q.tryTake(5), /bug: exploration clock went from 1002 to 5 ms/);
  });

  it('property: no window of windowMs holds more than quota grants, and a free slot is never refused', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 5 }), fc.integer({ min: 1, max: 500 }), fc.array(fc.integer({ min: 0, max: 200 }), { maxLength: 60 }), (quota, windowMs, gaps) => {
        const q = new ExplorationQuota({ quota, windowMs });
        const granted: number[] = [];
        let t = 0;
        for (const g of gaps) {
          t += g;
          const inWindow = granted.filter((x) => x > t - windowMs).length;
          assert.equal(q.tryTake(t), inWindow < quota);
          if (inWindow < quota) granted.push(t);
        }
      }),
      { seed: SEED, numRuns: 500 },
    );
  });

  it('explores only when the bound cannot be trusted here, and never past the cold-start rule on a busy engine', () => {
    assert.equal(explorationReason(false, BUSY), null);
    assert.equal(explorationReason(false, IDLE), 'uncalibrated');
    assert.equal(explorationReason(false, COLD), 'cold');
    assert.equal(explorationReason(true, null), 'cold');
    assert.equal(explorationReason(true, COLD), 'cold');
    assert.equal(explorationReason(true, IDLE), 'idle');
    assert.equal(explorationReason(true, BUSY), null);
  });
});

describe('AdmissionGate: a 99% guarantee cannot lock itself into refusing everything', () => {
  const BUDGET = 2000;
  /** Idle-engine latencies whose 99% bound is ~3× the prediction: above the budget for every request. */
  const calibrated99 = () => {
    const rng = new Rng(3, 'idle');
    const initial = Array.from({ length: 300 }, () => {
      const yhat = 900 + 200 * rng.uniform();
      return { yhat, y: yhat * Math.exp(0.5 * rng.normal()) };
    });
    return createOnlineCalibrator({ mode: 'rolling', score: ratioScore, alpha: 0.01, initial });
  };

  /** One arrival every 500 ms for a minute; returns how many were admitted and why. */
  function minute(gate: AdmissionGate, bound: () => ReturnType<ReturnType<typeof calibrated99>['bound']>, engine: ExplorationView): Map<string, number> {
    const why = new Map<string, number>();
    for (let t = 0; t < 60_000; t += 500) {
      const d = gate.decide({ bound: bound(), budgetMs: BUDGET, nowMs: t, engine });
      why.set(d.reason, (why.get(d.reason) ?? 0) + 1);
    }
    return why;
  }

  it('the bound alone refuses every request, even on an idle engine', () => {
    const cal = calibrated99();
    const b = cal.bound(1000);
    assert.ok(b.status === 'calibrated' && b.upper > BUDGET, JSON.stringify(b));
    assert.deepEqual(minute(new AdmissionGate(), () => cal.bound(1000), BUSY), new Map([['over_budget', 120]]));
  });

  it('on an idle engine it admits the exploration quota (4 per 10 s by default): 24 of 120 in a minute', () => {
    const cal = calibrated99();
    assert.deepEqual(minute(new AdmissionGate(), () => cal.bound(1000), IDLE), new Map([['explore', 24], ['over_budget', 96]]));
    assert.deepEqual(minute(new AdmissionGate(), () => cal.bound(1000), COLD), new Map([['explore', 24], ['over_budget', 96]]));
  });

  it('uncalibrated (fewer than minN outcomes), it explores on an idle engine within the quota, and not on a busy one (the cold-start rule decides there)', () => {
    const cal = createOnlineCalibrator({ mode: 'rolling', score: ratioScore, alpha: 0.01 });
    assert.deepEqual(minute(new AdmissionGate(), () => cal.bound(1000), IDLE), new Map([['explore', 24], ['uncalibrated', 96]]));
    assert.deepEqual(minute(new AdmissionGate(), () => cal.bound(1000), BUSY), new Map([['uncalibrated', 120]]));
  });

  it('a bound that fits admits without spending the quota, and exploring does not move the hysteresis regime', () => {
    const gate = new AdmissionGate();
    const fits = { status: 'calibrated', upper: 1500 } as const;
    const over = { status: 'calibrated', upper: 2500 } as const;
    assert.equal(gate.decide({ bound: fits, budgetMs: BUDGET, nowMs: 0, engine: BUSY }).reason, 'fits');
    assert.equal(gate.decide({ bound: over, budgetMs: BUDGET, nowMs: 1, engine: IDLE }).reason, 'explore');
    assert.equal(gate.hysteresis.state, 'shedding'); // the bound did not fit; the probe changes nothing about that
    assert.deepEqual(gate.decide({ bound: { status: 'calibrated', upper: 1900 }, budgetMs: BUDGET, nowMs: 2, engine: BUSY }), { admit: false, reason: 'hysteresis', boundMs: 1900, explored: null });
    assert.equal(gate.exploration.numGrants, 1);
  });
});
