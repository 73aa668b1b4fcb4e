import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { binMatrix, binOf, fitBinEdges } from '../../../src/admission/predictor/binning.ts';
import { fitGbdt } from '../../../src/admission/predictor/gbdt.ts';
import { heteroscedastic } from './synthetic.ts';

const column = (values: readonly number[]): number[][] => values.map((v) => [v]);

describe('binning', () => {
  it('gives a constant column one bin and no thresholds, and the booster never splits on it', () => {
    const [edges] = fitBinEdges(column([7, 7, 7, 7]), 1, 64);
    assert.equal(edges!.length, 0);
    assert.equal(binOf(edges!, 7), 0);
    const { X, y } = heteroscedastic(600, 3, 1);
    for (const row of X) row[2] = 42;
    const { model } = fitGbdt(X, y, { quantile: 0.5, numRounds: 20, minSamplesLeaf: 10 });
    assert.equal(model.featureGain[2], 0);
    assert.ok(!model.feature.includes(2));
  });

  it('gives each distinct value its own bin when there are few, with ties sharing one', () => {
    const [edges] = fitBinEdges(column([3, 1, 2, 2, 2, 1, 3, 3]), 1, 64);
    assert.deepEqual(Array.from(edges!), [1.5, 2.5]);
    assert.deepEqual(Array.from(binMatrix(column([1, 2, 2, 3, 0, 9]), [edges!])), [0, 1, 1, 2, 0, 2]);
  });

  it('splits adjacent doubles at the lower one, which has no midpoint between them', () => {
    const values = [1, 1 + Number.EPSILON, 1, 1 + Number.EPSILON];
    const [edges] = fitBinEdges(column(values), 1, 64);
    assert.deepEqual(Array.from(edges!), [1]);
    assert.deepEqual(Array.from(binMatrix(column(values), [edges!])), [0, 1, 0, 1]);
  });

  it('cuts distinct values into near-equal quantile bins', () => {
    const n = 10_000;
    const values = Array.from({ length: n }, (_, i) => Math.sqrt(i * 7919 % n));
    const [edges] = fitBinEdges(column(values), 1, 64);
    assert.equal(edges!.length, 63);
    const counts = new Array<number>(64).fill(0);
    for (const v of values) counts[binOf(edges!, v)]!++;
    for (const c of counts) assert.ok(Math.abs(c - n / 64) <= 2, `bin of ${c} rows, expected about ${n / 64}`);
  });

  it('rejects non-finite features with the row and column', () => {
    assert.throws(() => fitGbdt([[1, 2], [3, NaN]], [1, 2], { quantile: 0.5 }), /expected finite features, got NaN at row 1, feature 1/);
    assert.throws(() => fitGbdt([[1, 2], [3]], [1, 2], { quantile: 0.5 }), /expected 2 features in every row, got 1 in row 1/);
  });

  it('property: bin(v) ≤ b ⇔ v ≤ t_b for every training value, thresholds ascend, no bin is empty', () => {
    // A small pool gives heavy ties; 1 + k·ε gives adjacent doubles (no midpoint between them).
    const value = fc.oneof(
      fc.integer({ min: -5, max: 5 }),
      fc.integer({ min: 0, max: 3 }).map((k) => 1 + k * Number.EPSILON),
      fc.double({ min: -1e6, max: 1e6, noNaN: true, noDefaultInfinity: true }),
    );
    fc.assert(
      fc.property(fc.array(value, { minLength: 1, maxLength: 400 }), fc.integer({ min: 2, max: 256 }), (values, maxBins) => {
        const [edges] = fitBinEdges(column(values), 1, maxBins);
        const t = edges!;
        assert.ok(t.length <= maxBins - 1);
        for (let b = 1; b < t.length; b++) assert.ok(t[b - 1]! < t[b]!, 'thresholds strictly ascend');
        const used = new Set<number>();
        for (const v of values) {
          const bin = binOf(t, v);
          used.add(bin);
          for (let b = 0; b < t.length; b++) assert.equal(bin <= b, v <= t[b]!, `v=${v} bin=${bin} t_${b}=${t[b]}`);
        }
        assert.equal(used.size, t.length + 1, 'every bin holds a training value');
      }),
      { numRuns: 300 },
    );
  });
});
