import { test } from 'node:test';
import assert from 'node:assert/strict';
import { arrivalTimesMs, gapsOf } from '../../src/harness/arrivals.ts';
import { ksExponential, mean, stdSample } from '../../src/harness/stats.ts';
import { Rng } from '../../src/util/rng.ts';

const poisson = (seed: number, rate = 50, durationS = 60): Float64Array =>
  arrivalTimesMs({ kind: 'poisson', ratePerS: rate, durationS, gammaShape: 1, seed });

test('poisson gaps are Exp(λ): KS accepts, mean 1/λ, CV 1', () => {
  for (let seed = 0; seed < 5; seed++) {
    const gaps = gapsOf(poisson(seed));
    assert.ok(gaps.length > 2700 && gaps.length < 3300, `count ${gaps.length}`);
    const ks = ksExponential(gaps, 50 / 1000);
    assert.ok(ks.pValue > 0.001, `seed ${seed}: KS p ${ks.pValue}`);
    assert.ok(Math.abs(mean(gaps) - 20) < 1.5, `mean gap ${mean(gaps)}`);
    assert.ok(Math.abs(stdSample(gaps) / mean(gaps) - 1) < 0.08, 'CV ≈ 1');
  }
});

test('KS rejects gaps that are not exponential, and a wrong rate', () => {
  const rng = new Rng(7);
  const uniformGaps = Array.from({ length: 2000 }, () => rng.uniform() * 40); // mean 20 ms, not exponential
  assert.ok(ksExponential(uniformGaps, 50 / 1000).pValue < 1e-6);
  assert.ok(ksExponential(gapsOf(poisson(0)), 60 / 1000).pValue < 1e-6);
});

test('arrivals are seeded and ascending, and within [0, duration)', () => {
  assert.deepEqual(poisson(3, 10, 5), poisson(3, 10, 5));
  assert.notDeepEqual(poisson(3, 10, 5), poisson(4, 10, 5));
  const t = poisson(1, 100, 3);
  for (let i = 1; i < t.length; i++) assert.ok((t[i] ?? 0) > (t[i - 1] ?? 0));
  assert.ok((t[t.length - 1] ?? Infinity) < 3000 && (t[0] ?? -1) > 0);
});

test('gamma arrivals keep the mean rate and set CV = 1/sqrt(shape); fixed has CV 0', () => {
  const g = gapsOf(arrivalTimesMs({ kind: 'gamma', ratePerS: 50, durationS: 120, gammaShape: 0.25, seed: 1 }));
  assert.ok(Math.abs(mean(g) - 20) < 2, `mean ${mean(g)}`);
  assert.ok(Math.abs(stdSample(g) / mean(g) - 2) < 0.25, `CV ${stdSample(g) / mean(g)}`);
  const f = gapsOf(arrivalTimesMs({ kind: 'fixed', ratePerS: 10, durationS: 1, gammaShape: 1, seed: 0 }));
  assert.equal(f.length, 9);
  for (const x of f) assert.ok(Math.abs(x - 100) < 1e-9);
});

test('the count of arrivals in [0, T) is Poisson(λT): mean and variance over seeds', () => {
  const counts = Array.from({ length: 200 }, (_, s) => poisson(s, 10, 10).length);
  assert.ok(Math.abs(mean(counts) - 100) < 3 * Math.sqrt(100 / 200), `mean ${mean(counts)}`);
  assert.ok(Math.abs(stdSample(counts) ** 2 / 100 - 1) < 0.35, `var ${stdSample(counts) ** 2}`);
});
