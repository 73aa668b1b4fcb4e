// Cost of one admission-time prediction, and of training, at the shapes admission uses: the
// learned model (defaults: 200 trees of depth 4; and a heavy 500 × depth 6), the online
// throughput baseline, on synthetic rows of 14 features. Budget: a decision well under 0.2 ms.
//
//   node --import tsx bench/admission/predict.ts
//
// Reports the median over repeats of (time to predict N rows one call at a time) / N.
import { fitGbdt, predictGbdt, predictGbdtBatch, type GbdtOptions } from '../../src/admission/predictor/gbdt.ts';
import { OnlineLinearQuantile } from '../../src/admission/predictor/online-linear.ts';
import { Rng } from '../../src/util/rng.ts';

const NUM_FEATURES = 14;
const REPEATS = 15;

function rows(n: number, seed: number): { X: Float64Array[]; y: Float64Array } {
  const rng = new Rng(seed, 'bench-admission');
  const X: Float64Array[] = [];
  const y = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    const x = Float64Array.from({ length: NUM_FEATURES }, (_, f) => (f < 4 ? rng.int(4096) : rng.uniform()));
    X.push(x);
    y[i] = 50 + 0.3 * x[0]! + 12 * x[1]! * (0.5 + x[5]!) + 0.05 * x[2]! + rng.lognormal(3, 0.8) * (1 + x[4]!);
  }
  return { X, y };
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;

/** Median µs per call of f(x) over REPEATS passes through `X`. */
function perRow(X: readonly Float64Array[], f: (x: Float64Array) => number): number {
  let sink = 0;
  for (const x of X) sink += f(x); // warm-up
  const times: number[] = [];
  for (let r = 0; r < REPEATS; r++) {
    const t0 = performance.now();
    for (const x of X) sink += f(x);
    times.push(((performance.now() - t0) * 1000) / X.length);
  }
  if (Number.isNaN(sink)) console.log('(sink)');
  return median(times);
}

const test = rows(10_000, 2);
for (const [label, n, opts] of [
  ['defaults (200 × depth 4)', 20_000, { quantile: 0.9 }],
  ['heavy (500 × depth 6)', 50_000, { quantile: 0.9, numRounds: 500, maxDepth: 6, maxBins: 256 }],
] as [string, number, GbdtOptions][]) {
  const train = rows(n, 1);
  const t0 = performance.now();
  const { model } = fitGbdt(train.X, train.y, opts);
  const fitS = (performance.now() - t0) / 1000;
  const asArrays = test.X.map((x) => Array.from(x));
  const us = perRow(test.X, (x) => predictGbdt(model, x));
  const overhead = perRow(test.X, () => 0); // the harness's own loop, to subtract by eye
  const out = new Float64Array(test.X.length);
  const batchTimes: number[] = [];
  for (let r = 0; r < REPEATS; r++) {
    const t1 = performance.now();
    predictGbdtBatch(model, test.X, out);
    batchTimes.push(((performance.now() - t1) * 1000) / test.X.length);
  }
  let i = 0;
  const usNumberArray = perRow(test.X, () => predictGbdt(model, asArrays[i++ % asArrays.length]!));
  console.log(
    `gbdt ${label}: fit ${n} rows × ${NUM_FEATURES} features in ${fitS.toFixed(2)} s, ${model.feature.length} nodes; ` +
      `predict ${us.toFixed(2)} µs/row (Float64Array), ${usNumberArray.toFixed(2)} µs/row (number[]), batch ${median(batchTimes).toFixed(2)} µs/row; harness loop ${overhead.toFixed(3)} µs/row`,
  );
}

const online = new OnlineLinearQuantile({ quantile: 0.9, columns: [0, 1, 2], numFeatures: NUM_FEATURES, windowSize: 2000 });
const warm = rows(4000, 3);
let k = 0;
const observeUs = perRow(warm.X, (x) => (online.observe(x, warm.y[k++ % warm.y.length]!) ? 1 : 0));
const refitTimes: number[] = [];
for (let r = 0; r < REPEATS; r++) {
  const t0 = performance.now();
  online.refit();
  refitTimes.push((performance.now() - t0) * 1000);
}
console.log(
  `online linear (3 columns, window 2000): observe ${observeUs.toFixed(3)} µs, refit ${median(refitTimes).toFixed(1)} µs, predict ${perRow(test.X, (x) => online.predict(x)).toFixed(3)} µs/row`,
);
