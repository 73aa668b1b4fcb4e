// The gate's verdict as a pure function: each threshold and each invalid-run rule on hand-made
// numbers, at and just past its edge.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { BaselineRate, RateMeasurement } from '../../src/harness/gate/judge.ts';
import { DEFAULT_THRESHOLDS, MIN_ARRIVALS, confirmVerdict, judge, regressedRates, renderVerdict } from '../../src/harness/gate/judge.ts';

const BASE: BaselineRate[] = [
  { rate: 2, goodputRps: 1.8, p99E2eMs: 1000 },
  { rate: 6, goodputRps: 3.0, p99E2eMs: 2000 },
];

function m(rate: number, p: Partial<RateMeasurement> = {}): RateMeasurement {
  const b = BASE.find((x) => x.rate === rate)!;
  return {
    rate,
    numArrivals: 500,
    numCompleted: 400,
    numShed: 10,
    numTransportErrors: 0,
    goodputRps: b.goodputRps,
    p99E2eMs: b.p99E2eMs,
    generatorValid: true,
    generatorInvalidReason: null,
    ...p,
  };
}

test('equal to the baseline passes with exit 0', () => {
  const v = judge([m(2), m(6)], BASE);
  assert.equal(v.kind, 'pass');
  assert.equal(v.exitCode, 0);
  assert.deepEqual(v.reasons, []);
});

test('p99 at exactly +15% passes; just above it is a regression (exit 1) at either rate', () => {
  assert.equal(judge([m(2, { p99E2eMs: 1150 }), m(6, { p99E2eMs: 2300 })], BASE).exitCode, 0);
  const a = judge([m(2, { p99E2eMs: 1151 }), m(6)], BASE);
  assert.equal(a.exitCode, 1);
  assert.match(a.reasons.join(), /^2 req\/s: p99 E2E 1151 ms > 1150 ms/);
  assert.equal(judge([m(2), m(6, { p99E2eMs: 2301 })], BASE).exitCode, 1);
});

test('goodput at exactly 90% passes; just below it is a regression (exit 1) at either rate', () => {
  assert.equal(judge([m(2, { goodputRps: 1.62 }), m(6, { goodputRps: 2.7 })], BASE).exitCode, 0);
  const a = judge([m(2), m(6, { goodputRps: 2.69 })], BASE);
  assert.equal(a.exitCode, 1);
  assert.match(a.reasons.join(), /6 req\/s: goodput 2.69 req\/s < 2.70/);
  assert.equal(judge([m(2, { goodputRps: 1.61 }), m(6)], BASE).exitCode, 1);
});

test('better than the baseline (lower p99, higher goodput) passes', () => {
  assert.equal(judge([m(2, { p99E2eMs: 10, goodputRps: 5 }), m(6, { p99E2eMs: 10, goodputRps: 50 })], BASE).exitCode, 0);
});

test('a censored p99 (timeouts: +Infinity) is a regression, not a pass', () => {
  assert.equal(judge([m(2), m(6, { p99E2eMs: Infinity })], BASE).exitCode, 1);
});

test(`fewer than ${MIN_ARRIVALS} steady arrivals at a rate is an invalid run (exit 2); exactly ${MIN_ARRIVALS} is enough`, () => {
  assert.equal(judge([m(2, { numArrivals: MIN_ARRIVALS }), m(6)], BASE).exitCode, 0);
  const v = judge([m(2, { numArrivals: MIN_ARRIVALS - 1 }), m(6)], BASE);
  assert.equal(v.exitCode, 2);
  assert.match(v.reasons.join(), /too few arrivals for a p99: 99 < 100/);
});

test('nothing completed is an invalid run (exit 2), even though goodput 0 would also be a regression', () => {
  const v = judge([m(2), m(6, { numCompleted: 0, goodputRps: 0, p99E2eMs: NaN })], BASE);
  assert.equal(v.exitCode, 2);
  assert.match(v.reasons.join(), /nothing completed/);
});

test('a generator behind its schedule is an invalid run (exit 2), with the harness reason', () => {
  const v = judge([m(2, { generatorValid: false, generatorInvalidReason: 'generator fell behind its schedule: slip p99 31.00 ms > 20 ms' }), m(6)], BASE);
  assert.equal(v.exitCode, 2);
  assert.match(v.reasons.join(), /slip p99 31.00 ms > 20 ms/);
});

test('transport errors (a server that died) make the run invalid (exit 2)', () => {
  assert.equal(judge([m(2, { numTransportErrors: 3 }), m(6)], BASE).exitCode, 2);
});

test('a baseline rate that was not measured (dead server, no result) is an invalid run (exit 2)', () => {
  const v = judge([m(2)], BASE);
  assert.equal(v.exitCode, 2);
  assert.match(v.reasons.join(), /6 req\/s: not measured/);
  assert.equal(judge([], BASE).exitCode, 2);
});

test('invalid wins over a regression at the other rate', () => {
  assert.equal(judge([m(2, { goodputRps: 0.1 }), m(6, { numArrivals: 5 })], BASE).exitCode, 2);
});

test('thresholds are read, not hard-coded: a 0.5 floor lets 60% goodput pass', () => {
  assert.equal(judge([m(2, { goodputRps: 1.08 }), m(6)], BASE, { ...DEFAULT_THRESHOLDS, goodputFloor: 0.5 }).exitCode, 0);
  assert.equal(judge([m(2, { goodputRps: 1.08 }), m(6)], BASE).exitCode, 1);
});

test('bad thresholds and an empty baseline are bugs: they throw', () => {
  assert.throws(() => judge([], []), /at least one rate/);
  assert.throws(() => judge([m(2)], BASE, { ...DEFAULT_THRESHOLDS, goodputFloor: 0 }), /goodputFloor/);
});

test('the printed table has a row per rate and the verdict line', () => {
  const text = renderVerdict(judge([m(2, { p99E2eMs: 1500 }), m(6)], BASE));
  assert.match(text, /\| 2 \| 500 \| 400 \| 10 \| 1.80 \| 1.80 \| 1.00 \| 1500 ms \| 1000 ms \| 1.50 \| regression \|/);
  assert.match(text, /verdict: REGRESSION \(exit 1\)/);
});

test('confirmation: a regression whose second run passes is a pass; the first run is kept as a note', () => {
  const first = judge([m(2), m(6, { p99E2eMs: 2400 })], BASE);
  assert.equal(first.kind, 'regression');
  assert.deepEqual(regressedRates(first), [6]);
  const v = confirmVerdict(first, [m(6, { p99E2eMs: 2100 })]);
  assert.equal(v.kind, 'pass');
  assert.equal(v.exitCode, 0);
  assert.equal(v.rows[1]!.measured!.p99E2eMs, 2100, "the pass row is the confirmation's");
  assert.equal(v.rows[1]!.firstRun!.kind, 'regression');
  assert.equal(v.rows[0], first.rows[0], 'a rate that did not regress is untouched');
  assert.match(renderVerdict(v), /6: first run \(regressed; the confirmation above passed\)/);
});

test('confirmation: a regression confirmed by a second regression stands (exit 1), with both runs\' reasons', () => {
  const first = judge([m(2), m(6, { goodputRps: 2 })], BASE);
  const v = confirmVerdict(first, [m(6, { goodputRps: 2.1 })]);
  assert.equal(v.kind, 'regression');
  assert.equal(v.exitCode, 1);
  assert.equal(v.reasons.length, 2);
  assert.match(v.reasons[1]!, /^6 req\/s: confirmation: goodput 2\.10/);
  assert.match(renderVerdict(v), /confirmation \(regressed too\)/);
});

test('confirmation: a second run that cannot be judged (or is missing) does not clear a regression', () => {
  const first = judge([m(2), m(6, { p99E2eMs: Infinity })], BASE);
  assert.equal(confirmVerdict(first, [m(6, { numArrivals: 10 })]).kind, 'regression');
  assert.equal(confirmVerdict(first, []).kind, 'regression');
});

test('confirmation never touches an invalid run: invalid still wins', () => {
  const first = judge([m(2, { numCompleted: 0 }), m(6, { p99E2eMs: 9000 })], BASE);
  const v = confirmVerdict(first, [m(6)]);
  assert.equal(v.kind, 'invalid');
  assert.equal(v.rows[1]!.kind, 'pass');
});
