// Offline evaluation of the latency bound on collected traces: fit on whole training rounds,
// calibrate on a whole calibration round, measure on a whole test round that neither saw.
//
//   1. choose the score function and the base quantile level for the GBDT on a held-out slice of
//      the training fold (its last round), never on the calibration or test fold;
//   2. refit every predictor (GBDT, throughput arithmetic, constant) on the whole training fold at
//      the chosen level, calibrate each with each score on the calibration fold at each α;
//   3. on the test fold: coverage with a Wilson 95% interval, bound widths, and the share of
//      requests whose bound fits the SLO (what each would admit).
// Coverage cannot tell a good model from a useless one — all of them cover; the width is the
// comparison that matters, because half the bound is twice the admitted load at a fixed SLO.
//
// Scores: absolute (y − ŷ), ratio (log1p space) and scaled ((y − ŷ)/σ̂ with σ̂ the spread between the
// model at its level and the same model at the median, floored): a locally weighted score.
//
// One fold assignment is one draw. The unit of exchangeability is a collection round (its arrival
// realization decides whether a block near saturation collapses), so a single test round's coverage
// varies far more than its row-level Wilson interval says. `evaluateRotations` repeats the whole
// evaluation with every round as the test round once and pools the counts: conformal's guarantee is
// an expectation over calibration draws, and the pooled coverage estimates it.

import type { Dataset } from './dataset.ts';
import { holdOutSlice, splitFolds } from './conformal/folds.ts';
import type { GroupKey } from './conformal/folds.ts';
import { calibrate } from './conformal/quantile.ts';
import type { Score } from './conformal/score.ts';
import { absoluteScore, ratioScore, scaledScore } from './conformal/score.ts';
import type { Candidate } from './conformal/select.ts';
import { selectScoreAndLevel } from './conformal/select.ts';
import type { GbdtOptions } from './predictor/gbdt.ts';
import type { QuantilePredictor } from './predictor/predictor.ts';
import type { TrainModelSpec } from './predictor/train.ts';
import { train } from './predictor/train.ts';

/** The throughput-arithmetic baseline's columns (the same as the server's online baseline). */
export const LINEAR_COLUMNS = ['new_prefill_tokens', 'max_tokens', 'prompt_work_ahead', 'remaining_decode_tokens', 'running'] as const;

export interface EvaluateOptions {
  readonly train: readonly GroupKey[];
  readonly calibration: readonly GroupKey[];
  readonly test: readonly GroupKey[];
  readonly alphas: readonly number[];
  readonly sloMs: number;
  /** Base levels the GBDT may be fitted at (chosen on the held-out slice). */
  readonly levels?: readonly number[];
  /** Small-n guard for calibration. */
  readonly minN?: number;
  /** GBDT options other than the level (trees, learning rate, depth, ...); the defaults otherwise. */
  readonly gbdt?: Omit<GbdtOptions, 'quantile'>;
}

export interface EvaluationRow {
  readonly predictor: 'gbdt' | 'linear' | 'constant';
  readonly score: string;
  readonly level: number;
  readonly alpha: number;
  readonly numCalibration: number;
  readonly numTest: number;
  /** Share of test rows with latency ≤ bound, and its Wilson 95% interval (NaN: uncalibrated). */
  readonly coverage: number;
  readonly coverageLow: number;
  readonly coverageHigh: number;
  /** Test rows with latency ≤ bound (0 when uncalibrated). */
  readonly numCovered: number;
  readonly meanBoundMs: number;
  readonly medianBoundMs: number;
  /** Share of test rows whose bound fits the SLO: what the controller would admit. */
  readonly admitShare: number;
  /** Test rows whose bound fits the SLO, and of those the ones that finished inside it. */
  readonly numAdmitted: number;
  readonly numAdmittedInsideSlo: number;
}

export interface Evaluation {
  readonly selection: { readonly score: string; readonly level: number; readonly table: readonly unknown[] } | null;
  readonly rows: readonly EvaluationRow[];
  readonly numTrain: number;
  readonly importance: readonly { readonly feature: string; readonly share: number }[] | null;
}

interface Row {
  readonly i: number;
}

/** σ̂ floor for the scaled score, ms: a near-zero spread would let the narrowest interval set the quantile. */
const SCALE_FLOOR_MS = 50;
const scaled = scaledScore();
const SCORES: readonly Score[] = [absoluteScore, ratioScore, scaled];
/** The level of the second model whose distance to the first is σ̂. */
const SPREAD_LEVEL = 0.5;
const PROVENANCE = { runner: 'evaluation', modelSha256: '-', machine: '-', command: 'evaluate', createdAt: new Date(0).toISOString() };

export function evaluate(ds: Dataset, o: EvaluateOptions): Evaluation {
  const k = ds.featureNames.length;
  const xOf = (i: number): Float64Array => ds.x.subarray(i * k, (i + 1) * k);
  const rows: Row[] = Array.from({ length: ds.numRows }, (_, i) => ({ i }));
  const folds = splitFolds(rows, (r) => ds.group[r.i]!, { train: o.train, calibration: o.calibration, test: o.test });
  const fit = (subset: readonly Row[], spec: TrainModelSpec, level: number): QuantilePredictor =>
    train({ featureNames: ds.featureNames, X: subset.map((r) => xOf(r.i)), y: subset.map((r) => ds.y[r.i]!), quantile: level, model: spec, provenance: PROVENANCE }).predictor;

  const gbdtSpec: TrainModelSpec = { kind: 'gbdt', ...(o.gbdt === undefined ? {} : { options: o.gbdt }) };
  // 1. Score and base level, chosen on the held-out slice of the training fold.
  const levels = o.levels ?? [0.5, 0.9];
  const minN = o.minN ?? 100;
  let chosen = { score: ratioScore, level: 0.9 };
  let selection: Evaluation['selection'] = null;
  if (folds.train.groups.length >= 3) {
    const split = holdOutSlice(folds.train, folds.train.groups.slice(-2));
    const fitted = levels.map((level) => ({ level, p: fit(split.fit.rows, gbdtSpec, level) }));
    const candidates: Candidate<Row>[] = fitted.flatMap(({ level, p }) => [absoluteScore, ratioScore].map((score) => ({ score, level, predict: (r: Row) => ({ yhat: Math.max(0, p.predict(xOf(r.i))) }) })));
    const alpha = Math.min(...o.alphas);
    const sel = selectScoreAndLevel(split.heldOut, candidates, { alpha, latencyOf: (r) => ds.y[r.i]!, minN: Math.min(minN, Math.floor(split.heldOut.rows.length / 4)) });
    if (sel.chosen !== null) chosen = { score: sel.chosen.score, level: sel.chosen.level };
    selection = { score: chosen.score.name, level: chosen.level, table: sel.table };
  }

  // 2–3. Every predictor at the chosen level, every score, every α.
  const specs: { name: EvaluationRow['predictor']; spec: TrainModelSpec }[] = [
    { name: 'gbdt', spec: gbdtSpec },
    { name: 'linear', spec: { kind: 'linear', columns: LINEAR_COLUMNS } },
    { name: 'constant', spec: { kind: 'constant' } },
  ];
  const out: EvaluationRow[] = [];
  let importance: Evaluation['importance'] = null;
  const trainX = folds.train.rows.map((r) => xOf(r.i));
  const trainY = folds.train.rows.map((r) => ds.y[r.i]!);
  for (const { name, spec } of specs) {
    const t = train({ featureNames: ds.featureNames, X: trainX, y: trainY, quantile: chosen.level, model: spec, provenance: PROVENANCE });
    const mid = train({ featureNames: ds.featureNames, X: trainX, y: trainY, quantile: SPREAD_LEVEL, model: spec, provenance: PROVENANCE }).predictor;
    if (name === 'gbdt') importance = t.importance?.map((f) => ({ feature: f.feature, share: f.share })) ?? null;
    const at = (r: Row): { yhat: number; y: number; aux: number } => {
      const x = xOf(r.i);
      const yhat = Math.max(0, t.predictor.predict(x));
      return { yhat, y: ds.y[r.i]!, aux: Math.max(SCALE_FLOOR_MS, yhat - Math.max(0, mid.predict(x))) };
    };
    const cal = folds.calibration.rows.map(at);
    const test = folds.test.rows.map(at);
    for (const score of SCORES) {
      for (const alpha of o.alphas) out.push(measure(name, score, chosen.level, alpha, cal, test, o.sloMs, minN));
    }
  }
  return { selection, rows: out, numTrain: folds.train.rows.length, importance };
}

type Pair = { readonly yhat: number; readonly y: number; readonly aux: number };

function measure(predictor: EvaluationRow['predictor'], score: Score, level: number, alpha: number, cal: readonly Pair[], test: readonly Pair[], sloMs: number, minN: number): EvaluationRow {
  const c = calibrate(cal, score, { alpha, minN });
  const base = { predictor, score: score.name, level, alpha, numCalibration: cal.length, numTest: test.length };
  if (c.status !== 'calibrated' || test.length === 0) return { ...base, coverage: NaN, coverageLow: NaN, coverageHigh: NaN, numCovered: 0, meanBoundMs: NaN, medianBoundMs: NaN, admitShare: 0, numAdmitted: 0, numAdmittedInsideSlo: 0 };
  const bounds = test.map((t) => score.bound(t.yhat, c.q, t.aux));
  const covered = test.filter((t, i) => t.y <= bounds[i]!).length;
  const admitted = test.filter((_, i) => bounds[i]! <= sloMs);
  const [lo, hi] = wilson(covered, test.length);
  const sorted = [...bounds].sort((a, b) => a - b);
  return {
    ...base,
    coverage: covered / test.length,
    coverageLow: lo,
    coverageHigh: hi,
    numCovered: covered,
    meanBoundMs: bounds.reduce((s, b) => s + b, 0) / bounds.length,
    medianBoundMs: sorted[Math.floor(sorted.length / 2)]!,
    admitShare: admitted.length / bounds.length,
    numAdmitted: admitted.length,
    numAdmittedInsideSlo: admitted.filter((t) => t.y <= sloMs).length,
  };
}

export interface Rotation {
  readonly test: string;
  readonly calibration: readonly string[];
  readonly train: readonly string[];
  readonly evaluation: Evaluation;
}

/** One pooled row: a (predictor, score, α) cell summed over the rotations. */
export interface PooledRow {
  readonly predictor: EvaluationRow['predictor'];
  readonly score: string;
  readonly alpha: number;
  readonly numTest: number;
  readonly numCovered: number;
  /** Pooled coverage and its Wilson 95% interval (over rows: it understates the between-round spread, given beside it). */
  readonly coverage: number;
  readonly coverageLow: number;
  readonly coverageHigh: number;
  /** The lowest and highest single-rotation coverage. */
  readonly rotationMin: number;
  readonly rotationMax: number;
  /** Mean bound over every test row of every rotation, ms. */
  readonly meanBoundMs: number;
  readonly admitShare: number;
  readonly numAdmitted: number;
  readonly numAdmittedInsideSlo: number;
}

/**
 * Every round the test round once: the calibration rounds are the `numCalibration` rounds after it
 * (cyclically), the training rounds the rest. Needs at least numCalibration + 2 rounds.
 */
export function evaluateRotations(ds: Dataset, rounds: readonly string[], numCalibration: number, o: Omit<EvaluateOptions, 'train' | 'calibration' | 'test'>, blocksOf: (rounds: readonly string[]) => GroupKey[]): { rotations: Rotation[]; pooled: PooledRow[] } {
  const k = rounds.length;
  if (!Number.isSafeInteger(numCalibration) || numCalibration < 1 || k < numCalibration + 2) throw new Error(`evaluateRotations: need at least ${numCalibration + 2} rounds for ${numCalibration} calibration round(s), got ${k}`);
  const rotations: Rotation[] = rounds.map((test, t) => {
    const calibration = Array.from({ length: numCalibration }, (_, j) => rounds[(t + 1 + j) % k]!);
    const train = rounds.filter((r) => r !== test && !calibration.includes(r));
    return { test, calibration, train, evaluation: evaluate(ds, { ...o, train: blocksOf(train), calibration: blocksOf(calibration), test: blocksOf([test]) }) };
  });
  const cells = new Map<string, EvaluationRow[]>();
  for (const r of rotations) {
    for (const row of r.evaluation.rows) {
      const key = `${row.predictor}/${row.score}/${row.alpha}`;
      cells.set(key, [...(cells.get(key) ?? []), row]);
    }
  }
  const pooled = [...cells.values()].map((rows): PooledRow => {
    const numTest = rows.reduce((a, r) => a + r.numTest, 0);
    const numCovered = rows.reduce((a, r) => a + r.numCovered, 0);
    const [lo, hi] = numTest === 0 ? [NaN, NaN] : wilson(numCovered, numTest);
    const each = rows.map((r) => r.coverage);
    const numAdmitted = rows.reduce((a, r) => a + r.numAdmitted, 0);
    return {
      predictor: rows[0]!.predictor,
      score: rows[0]!.score,
      alpha: rows[0]!.alpha,
      numTest,
      numCovered,
      coverage: numCovered / numTest,
      coverageLow: lo,
      coverageHigh: hi,
      rotationMin: Math.min(...each),
      rotationMax: Math.max(...each),
      meanBoundMs: rows.reduce((a, r) => a + r.meanBoundMs * r.numTest, 0) / numTest,
      admitShare: numAdmitted / numTest,
      numAdmitted,
      numAdmittedInsideSlo: rows.reduce((a, r) => a + r.numAdmittedInsideSlo, 0),
    };
  });
  return { rotations, pooled };
}

/** Wilson score interval at 95% for k successes in n. */
export function wilson(k: number, n: number): [number, number] {
  const z = 1.959964;
  const p = k / n;
  const d = 1 + (z * z) / n;
  const centre = (p + (z * z) / (2 * n)) / d;
  const half = (z * Math.sqrt((p * (1 - p)) / n + (z * z) / (4 * n * n))) / d;
  return [Math.max(0, centre - half), Math.min(1, centre + half)];
}
