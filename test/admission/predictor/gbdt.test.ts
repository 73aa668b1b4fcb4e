import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { fitConstantQuantile } from '../../../src/admission/predictor/baselines.ts';
import { featureImportance, fitGbdt, predictGbdt, predictGbdtBatch } from '../../../src/admission/predictor/gbdt.ts';
import { meanPinball } from '../../../src/admission/predictor/quantile.ts';
import { coverage, heteroscedastic, pureNoise } from './synthetic.ts';

describe('fitGbdt', () => {
  it('validates its options', () => {
    const X = [[1], [2]];
    const y = [1, 2];
    assert.throws(() => fitGbdt(X, y, { quantile: 1 }), /expected quantile in \(0, 1\), got 1/);
    assert.throws(() => fitGbdt(X, y, { quantile: 0.9, numRounds: -1 }), /expected numRounds to be an integer in \[0, 100000\], got -1/);
    assert.throws(() => fitGbdt(X, y, { quantile: 0.9, maxBins: 300 }), /expected maxBins to be an integer in \[2, 256\], got 300/);
    assert.throws(() => fitGbdt(X, y, { quantile: 0.9, subsample: 0 }), /expected subsample to be a number/);
    assert.throws(() => fitGbdt(X, [1, -2], { quantile: 0.9, target: 'log1p' }), /expected targets > -1/);
    assert.throws(() => fitGbdt([], [], { quantile: 0.9 }), /expected at least one row, got 0/);
  });

  it('property: without subsampling the training pinball loss never rises from one round to the next', () => {
    const options = fc.record({
      quantile: fc.constantFrom(0.1, 0.5, 0.9, 0.95),
      learningRate: fc.constantFrom(0.05, 0.3, 1),
      maxDepth: fc.integer({ min: 1, max: 5 }),
      minSamplesLeaf: fc.integer({ min: 1, max: 20 }),
      l2: fc.constantFrom(0, 1, 10),
      maxBins: fc.constantFrom(2, 8, 64),
    });
    fc.assert(
      fc.property(fc.integer({ min: 20, max: 300 }), fc.integer({ min: 2, max: 4 }), fc.integer(), options, (n, numFeatures, seed, opts) => {
        const { X, y } = heteroscedastic(n, numFeatures, seed);
        const { trainLoss } = fitGbdt(X, y, { ...opts, numRounds: 15 });
        for (let r = 1; r < trainLoss.length; r++) {
          assert.ok(trainLoss[r]! <= trainLoss[r - 1]! * (1 + 1e-12) + 1e-15, `round ${r}: ${trainLoss[r - 1]} → ${trainLoss[r]}`);
        }
      }),
      { numRuns: 60 },
    );
  });

  it('lowers held-out pinball loss over the rounds', () => {
    const train = heteroscedastic(3000, 4, 11);
    const test = heteroscedastic(5000, 4, 12);
    const tau = 0.9;
    const loss = (numRounds: number): number => meanPinball(test.y, predictGbdtBatch(fitGbdt(train.X, train.y, { quantile: tau, numRounds }).model, test.X), tau);
    const [l0, l10, l100] = [loss(0), loss(10), loss(100)];
    assert.ok(l10 < l0 && l100 < l10, `held-out loss ${l0} → ${l10} → ${l100}`);
  });

  it('predicts with thresholds exactly what training computed with bins', () => {
    const { X, y } = heteroscedastic(2000, 5, 3);
    const fit = fitGbdt(X, y, { quantile: 0.7, numRounds: 30, maxDepth: 5, maxBins: 16, subsample: 0.6, seed: 4 });
    const predicted = meanPinball(y, predictGbdtBatch(fit.model, X), 0.7);
    assert.ok(Math.abs(predicted - fit.trainLoss[30]!) <= 1e-12 * predicted, `${predicted} vs ${fit.trainLoss[30]}`);
    const { feature, left, right, roots } = fit.model;
    for (let k = 0; k < feature.length; k++) if (feature[k]! >= 0) assert.ok(left[k]! > k && right[k]! > k, 'pre-order: children after parent');
    assert.equal(roots.length, 30);
  });

  for (const tau of [0.5, 0.9]) {
    it(`covers a fresh heteroscedastic sample at τ = ${tau} to within 3 points`, () => {
      const train = heteroscedastic(5000, 4, 21);
      const test = heteroscedastic(20_000, 4, 22);
      const { model } = fitGbdt(train.X, train.y, { quantile: tau, numRounds: 150, maxDepth: 3, minSamplesLeaf: 40 });
      const c = coverage(test.y, predictGbdtBatch(model, test.X));
      assert.ok(Math.abs(c - tau) <= 0.03, `coverage ${c} at τ = ${tau}`);
    });
  }

  it('beats the constant quantile when features matter, and is not much worse when they do not', () => {
    const tau = 0.9;
    const compare = (make: typeof heteroscedastic): { gbdt: number; constant: number } => {
      const train = make(3000, 4, 31);
      const test = make(10_000, 4, 32);
      const { model } = fitGbdt(train.X, train.y, { quantile: tau, numRounds: 100, maxDepth: 3, minSamplesLeaf: 40 });
      const constant = fitConstantQuantile(train.X, train.y, tau).value;
      return { gbdt: meanPinball(test.y, predictGbdtBatch(model, test.X), tau), constant: meanPinball(test.y, test.y.map(() => constant), tau) };
    };
    const signal = compare(heteroscedastic);
    assert.ok(signal.gbdt < 0.75 * signal.constant, `with signal: gbdt ${signal.gbdt} vs constant ${signal.constant}`);
    const noise = compare(pureNoise);
    assert.ok(noise.gbdt < 1.05 * noise.constant, `noise only: gbdt ${noise.gbdt} vs constant ${noise.constant}`);
  });

  it('is deterministic for a seed, and the seed matters when subsampling', () => {
    const { X, y } = heteroscedastic(1500, 3, 5);
    const opts = { quantile: 0.9, numRounds: 25, subsample: 0.5, seed: 9 };
    const a = fitGbdt(X, y, opts);
    const b = fitGbdt(X, y, opts);
    assert.deepEqual(a.model, b.model);
    assert.deepEqual(a.trainLoss, b.trainLoss);
    const c = fitGbdt(X, y, { ...opts, seed: 10 });
    assert.notDeepEqual(a.model.value, c.model.value);
  });

  it('fits log1p(y) and predicts back in latency units', () => {
    const train = heteroscedastic(3000, 3, 41);
    const test = heteroscedastic(10_000, 3, 42);
    const exp = (ys: number[]): number[] => ys.map((v) => Math.exp(v));
    const { model } = fitGbdt(train.X, exp(train.y), { quantile: 0.9, numRounds: 100, maxDepth: 3, minSamplesLeaf: 40, target: 'log1p' });
    const c = coverage(exp(test.y), predictGbdtBatch(model, test.X));
    assert.ok(Math.abs(c - 0.9) <= 0.03, `coverage ${c}`);
    assert.ok(predictGbdt(model, [0.5, 0.5, 0.5]) > 0);
  });

  it('credits the features that matter in its importance', () => {
    const { X, y } = heteroscedastic(3000, 4, 51);
    const imp = featureImportance(fitGbdt(X, y, { quantile: 0.9, numRounds: 50 }).model);
    assert.ok(Math.abs(imp.reduce((s, i) => s + i.share, 0) - 1) < 1e-12);
    assert.ok(imp[0]!.share + imp[1]!.share > 0.8, `shares ${imp.map((i) => i.share.toFixed(3)).join(' ')}`);
  });
});
