import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { readFileSync } from 'node:fs';
import { BoundModel } from '../../../src/admission/bound-model.ts';
import { RollingCalibrator } from '../../../src/admission/conformal/rolling-calibrator.ts';
import { ratioScore } from '../../../src/admission/conformal/score.ts';
import { ONLINE_BASELINE, onlineBaseline } from '../../../src/admission/factory.ts';
import { FEATURE_NAMES, NUM_FEATURES, type FeatureName } from '../../../src/admission/features.ts';
import { fitLinearQuantile, predictLinear } from '../../../src/admission/predictor/baselines.ts';
import { OnlineLinearQuantile } from '../../../src/admission/predictor/online-linear.ts';
import { Rng } from '../../../src/util/rng.ts';

/**
 * Token-like columns of very different scales, latency roughly linear in them plus skewed noise.
 * No column is nearly constant over a window: on an exactly collinear window only the ridge keeps
 * the solve finite, the coefficients are rounding noise amplified ~1/ridge, and no two summation
 * orders agree to 1e-9 (that is what the ridge is for, not something to compare).
 */
function stream(n: number, seed: number): { X: number[][]; y: number[] } {
  const rng = new Rng(seed, 'online');
  const X: number[][] = [];
  const y: number[] = [];
  for (let i = 0; i < n; i++) {
    const row = [rng.int(4000), rng.uniform(), rng.int(512), rng.int(20_000), rng.int(64)];
    X.push(row);
    y.push(30 + 0.4 * row[0]! + 18 * row[2]! + 0.05 * row[3]! + rng.exponential(1 / (50 + 0.2 * row[0]!)));
  }
  return { X, y };
}

describe('OnlineLinearQuantile', () => {
  it('validates its options', () => {
    assert.throws(() => new OnlineLinearQuantile({ quantile: 0.9, columns: [0], numFeatures: 2, windowSize: 2 }), /expected windowSize to be an integer in \[3, /);
    assert.throws(() => new OnlineLinearQuantile({ quantile: 0.9, columns: [5], numFeatures: 2, windowSize: 100 }), /expected column indices in \[0, 2\), got 5/);
  });

  it('is not ready until a refit succeeds, and predict before then is a bug', () => {
    const m = new OnlineLinearQuantile({ quantile: 0.9, columns: [0, 2], numFeatures: 5, windowSize: 50 });
    assert.equal(m.ready, false);
    assert.equal(m.toModel(), null);
    assert.throws(() => m.predict([1, 2, 3, 4, 5]), /^BugError: bug: .*check ready/);
    const { X, y } = stream(3, 1);
    for (let i = 0; i < 3; i++) m.observe(X[i]!, y[i]!);
    assert.equal(m.refit(), false, 'k = 3 coefficients need more than 3 rows');
    assert.equal(m.observe([1, 2, 3, 4, 5], NaN), false);
    assert.equal(m.observe([Infinity, 2, 3, 4, 5], 1), false);
    assert.equal(m.numObservations, 3);
  });

  it('property: after any stream, a refit equals a batch fit on the same window to 1e-9 of the latency scale', () => {
    // Runs that slid the window past a full rebuild, and refits made between rebuilds: both must occur.
    let numRebuilt = 0;
    let numBetweenRebuilds = 0;
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 120 }),
        fc.integer({ min: 1, max: 400 }),
        fc.subarray([0, 1, 2, 3, 4], { minLength: 1 }),
        fc.constantFrom(0.5, 0.9, 0.99),
        fc.integer(),
        (extraWindow, n, columns, quantile, seed) => {
          const windowSize = 4 * (columns.length + 1) + extraWindow;
          const { X, y } = stream(n, seed);
          const online = new OnlineLinearQuantile({ quantile, columns, numFeatures: 5, windowSize });
          for (let i = 0; i < n; i++) {
            online.observe(X[i]!, y[i]!);
            if (i % 17 !== 16 && i !== n - 1) continue;
            const lo = Math.max(0, i + 1 - windowSize);
            const batch = fitLinearQuantile(X.slice(lo, i + 1), y.slice(lo, i + 1), { quantile, columns });
            const ok = online.refit();
            if (i + 1 - lo <= columns.length + 1) {
              assert.equal(ok, false);
              continue;
            }
            assert.ok(ok && batch !== null);
            const numEvicted = i + 1 - windowSize;
            if (numEvicted >= windowSize) numRebuilt++;
            if (numEvicted > 0 && numEvicted % windowSize !== 0) numBetweenRebuilds++;
            // Relative to the latency scale: a coefficient the data say is ~0 (column 1 does nothing)
            // has no relative precision of its own, but its contribution to a prediction does.
            const got = online.toModel()!;
            const window = X.slice(lo, i + 1);
            const scale = Math.max(...y.slice(lo, i + 1).map(Math.abs));
            const near = (a: number, b: number, what: string): void => assert.ok(Math.abs(a - b) <= 1e-9 * scale, `${what}: ${a} vs ${b} (scale ${scale})`);
            near(got.intercept, batch.intercept, 'intercept');
            near(got.shift, batch.shift, 'shift');
            got.coefficients.forEach((c, j) => {
              const xMax = Math.max(...window.map((x) => Math.abs(x[columns[j]!]!)));
              near(c * xMax, batch.coefficients[j]! * xMax, `coefficient ${j} × max |x|`);
            });
            for (const x of window) near(online.predict(x), predictLinear(batch, x), 'prediction');
          }
        },
      ),
      { numRuns: 150 },
    );
    assert.ok(numRebuilt > 20 && numBetweenRebuilds > 20, `reached: ${numRebuilt} refits after a rebuild, ${numBetweenRebuilds} between rebuilds`);
  });
});

/**
 * The first 32 outcomes of a recorded run (chat-natural at 2x: outputs end at EOS, max_tokens a
 * constant cap of 512 after three 1-token warm-up probes) and the arrivals between them, in the
 * columns of the server's E2E baseline, fed through the server's BoundModel (its refit cadence);
 * every arrival is predicted once the model is ready.
 */
function replayRecordedStart(ridge: number, minRows: number): { maxPrediction: number; maxLatency: number; numPredictions: number } {
  const path = new URL('../../fixtures/eos-cap-outcomes.json', import.meta.url);
  const fixture = JSON.parse(readFileSync(path, 'utf8')) as { columns: FeatureName[]; outcomes: number[][]; arrivals: { after: number; x: number[] }[] };
  assert.deepEqual(fixture.columns, [...ONLINE_BASELINE.e2eColumns]);
  const bound = new BoundModel({ kind: 'online', model: onlineBaseline(ONLINE_BASELINE.e2eColumns, ridge, minRows) }, new RollingCalibrator({ score: ratioScore, alpha: 0.05 }));
  const row = (values: readonly number[]) => {
    const x = new Float64Array(NUM_FEATURES);
    fixture.columns.forEach((name, j) => (x[FEATURE_NAMES.indexOf(name)] = values[j]!));
    return x;
  };
  let maxPrediction = 0;
  let maxLatency = 0;
  let numPredictions = 0;
  let next = 0;
  fixture.outcomes.forEach((o, i) => {
    for (; next < fixture.arrivals.length && fixture.arrivals[next]!.after === i; next++) {
      const yhat = bound.predict(row(fixture.arrivals[next]!.x));
      if (yhat === null) continue;
      maxPrediction = Math.max(maxPrediction, yhat);
      numPredictions++;
    }
    const y = o[o.length - 1]!;
    maxLatency = Math.max(maxLatency, y);
    bound.observe(row(o.slice(0, -1)), null, y, false);
  });
  return { maxPrediction, maxLatency, numPredictions };
}

describe("the server's online E2E baseline on a recorded start", () => {
  it('predicts within a few times the latencies it was fitted on', () => {
    const { maxPrediction, maxLatency, numPredictions } = replayRecordedStart(ONLINE_BASELINE.ridge, ONLINE_BASELINE.minRows);
    assert.ok(numPredictions >= 10, `${numPredictions} predictions`);
    assert.ok(maxPrediction <= 3 * maxLatency, `largest prediction ${maxPrediction.toFixed(0)} ms, largest latency ${maxLatency} ms`);
  });

  it('the fixture holds the failure the ridge prevents: a 1e-9 ridge predicts past 5x', () => {
    const { maxPrediction, maxLatency } = replayRecordedStart(1e-9, ONLINE_BASELINE.minRows);
    assert.ok(maxPrediction > 5 * maxLatency, `largest prediction ${maxPrediction.toFixed(0)} ms, largest latency ${maxLatency} ms`);
  });

  it('refuses a first fit below minRows, and a minRows below the coefficients + 1', () => {
    assert.throws(() => new OnlineLinearQuantile({ quantile: 0.9, columns: [0, 2], numFeatures: 5, windowSize: 50, minRows: 3 }), /expected minRows to be an integer in \[4, 50\]/);
    const m = new OnlineLinearQuantile({ quantile: 0.9, columns: [0, 2], numFeatures: 5, windowSize: 50, minRows: 10 });
    const { X, y } = stream(10, 3);
    for (let i = 0; i < 9; i++) {
      m.observe(X[i]!, y[i]!);
      assert.equal(m.refit(), false, `${i + 1} rows`);
    }
    m.observe(X[9]!, y[9]!);
    assert.equal(m.refit(), true);
  });
});
