import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { fitConstantQuantile, fitLinearQuantile, predictLinear } from '../../../src/admission/predictor/baselines.ts';
import { toPredictor } from '../../../src/admission/predictor/predictor.ts';
import { quantileOf } from '../../../src/admission/predictor/quantile.ts';
import { coverage, heteroscedastic } from './synthetic.ts';

describe('baselines', () => {
  it('the constant is the empirical τ-quantile: the ceil(τ·n)-th smallest', () => {
    const y = [5, 1, 4, 2, 3, 9, 8, 7, 6, 10];
    const X = y.map(() => [0]);
    assert.equal(fitConstantQuantile(X, y, 0.9).value, 9);
    assert.equal(fitConstantQuantile(X, y, 0.5).value, 5);
    assert.equal(fitConstantQuantile(X, y, 0.01).value, 1);
    assert.equal(quantileOf([3], 0.99), 3);
    // 0.55 · 100 is 55.00000000000001 in binary; the 55th smallest is still the answer.
    assert.equal(quantileOf(Array.from({ length: 100 }, (_, i) => 100 - i), 0.55), 55);
    assert.equal(toPredictor(fitConstantQuantile(X, y, 0.9)).predict([123]), 9);
  });

  it('recovers exact rates from noiseless throughput data, with no shift', () => {
    // latency = 40 + 0.5·prefill + 20·requested + 0.25·queued; column 1 is ignored.
    const X: number[][] = [];
    const y: number[] = [];
    for (let i = 0; i < 200; i++) {
      const row = [(i * 37) % 2000, i % 7, (i * 13) % 256, (i * 101) % 5000];
      X.push(row);
      y.push(40 + 0.5 * row[0]! + 20 * row[2]! + 0.25 * row[3]!);
    }
    const m = fitLinearQuantile(X, y, { quantile: 0.9, columns: [0, 2, 3] })!;
    const close = (a: number, b: number): boolean => Math.abs(a - b) <= 1e-6 * Math.max(1, Math.abs(b));
    assert.ok(close(m.intercept, 40), `intercept ${m.intercept}`);
    for (const [got, want] of [[m.coefficients[0]!, 0.5], [m.coefficients[1]!, 20], [m.coefficients[2]!, 0.25]] as const) assert.ok(close(got, want), `${got} vs ${want}`);
    assert.ok(Math.abs(m.shift) < 1e-6 * Math.max(...y), `shift ${m.shift}`);
    assert.ok(close(predictLinear(m, [100, 3, 10, 400]), 40 + 50 + 200 + 100));
  });

  it('shifts to the τ-quantile of its residuals, so it covers τ of the training rows', () => {
    const { X, y } = heteroscedastic(4000, 3, 7);
    for (const quantile of [0.5, 0.9]) {
      const m = fitLinearQuantile(X, y, { quantile, columns: [0, 1] })!;
      const c = coverage(y, X.map((x) => predictLinear(m, x)));
      assert.ok(Math.abs(c - quantile) <= 1 / X.length + 1e-12, `coverage ${c} at ${quantile}`);
    }
  });

  it('validates its columns, and returns null for collinear columns without a ridge', () => {
    const X = [[1, 2], [2, 4], [3, 6], [4, 8]];
    const y = [1, 2, 3, 4];
    assert.throws(() => fitLinearQuantile(X, y, { quantile: 0.9, columns: [2] }), /expected column indices in \[0, 2\), got 2/);
    assert.throws(() => fitLinearQuantile(X, y, { quantile: 0.9, columns: [0, 0] }), /expected distinct columns, got \[0, 0\]/);
    assert.throws(() => fitLinearQuantile(X, y, { quantile: 0.9, columns: [0, 1, 0, 1, 0, 1, 0, 1, 0] }), /expected at most 8 columns/);
    assert.equal(fitLinearQuantile(X, y, { quantile: 0.9, columns: [0, 1], ridge: 0 }), null);
    assert.notEqual(fitLinearQuantile(X, y, { quantile: 0.9, columns: [0, 1] }), null);
  });
});
