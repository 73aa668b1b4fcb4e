// Choosing the nonconformity score and the base quantile level on a held-out slice of the training
// fold: the narrowest mean bound among candidates that reach nominal coverage there.
//
// Why there and nowhere else: a choice made on the calibration fold tunes the very rows the bound is
// calibrated against, and one made on the test fold is a number optimised for rather than measured.
// The signature enforces it: the only input is a Fold<'heldout'>, which only holdOutSlice mints, and
// only from a training fold (folds.ts). Candidates predict row by row, so this module reads exactly
// the slice's rows and nothing else.
//
// How: the slice's groups are dealt alternately into halves A and B (whole groups, first-seen order);
// each candidate is calibrated on A and evaluated on B, then the other way round, and the two
// evaluations are pooled. Coverage and width are both measured on rows the calibration did not see.
//
// Complexity: O(candidates · rows · log rows).

import type { Fold } from './folds.ts';
import { calibrate, DEFAULT_MIN_N, validateAlpha, validateMinN, type Observation } from './quantile.ts';
import type { Score } from './score.ts';
import { bug } from '../../util/bug.ts';

/** What a candidate predictor says about one row. */
export interface Prediction {
  readonly yhat: number;
  /** σ̂ for the scaled score. */
  readonly aux?: number;
}

/** One (score, base level) pair with the predictions of the model fitted at that level. */
export interface Candidate<Row> {
  readonly score: Score;
  /** The base quantile level the model was fitted at (e.g. 0.9): a label here, not a computation. */
  readonly level: number;
  predict(row: Row): Prediction;
}

export interface SelectOptions<Row> {
  /** The miscoverage the bound will be calibrated to. */
  readonly alpha: number;
  /** The observed latency of a row. */
  readonly latencyOf: (row: Row) => number;
  /** Small-n guard for each half; 100 by default. */
  readonly minN?: number;
}

/** One line of the comparison table (reported, whichever is chosen). */
export interface CandidateReport {
  readonly score: string;
  readonly level: number;
  /** Share of evaluated rows with y ≤ bound (NaN when a half could not be calibrated). */
  readonly coverage: number;
  /** Mean bound over evaluated rows (+∞ when any bound is). */
  readonly meanBound: number;
  /** The two halves' conformal quantiles (+∞ where uncalibrated). */
  readonly q: readonly [number, number];
  /** coverage ≥ 1−α with a finite mean bound. */
  readonly eligible: boolean;
}

export interface Selection<Row> {
  /** The eligible candidate with the narrowest mean bound; null when none is eligible. */
  readonly chosen: Candidate<Row> | null;
  readonly table: readonly CandidateReport[];
}

export function selectScoreAndLevel<Row>(heldOut: Fold<'heldout', Row>, candidates: readonly Candidate<Row>[], options: SelectOptions<Row>): Selection<Row> {
  if (heldOut.role !== 'heldout') bug(`selection reads only a held-out slice of the training fold, got the ${String(heldOut.role)} fold`);
  const { alpha, latencyOf, minN = DEFAULT_MIN_N } = options;
  validateAlpha('selectScoreAndLevel', alpha);
  validateMinN('selectScoreAndLevel', minN);
  if (candidates.length === 0) throw new RangeError('selectScoreAndLevel: expected at least one candidate, got 0');
  if (heldOut.groups.length < 2) throw new RangeError(`selectScoreAndLevel: expected a slice of at least 2 groups, got ${heldOut.groups.length}`);

  const half = new Map(heldOut.groups.map((g, i) => [g, i % 2]));
  const halves: [number[], number[]] = [[], []];
  heldOut.rowGroups.forEach((g, i) => halves[half.get(g)!]!.push(i));
  const ys = heldOut.rows.map(latencyOf);

  const table: CandidateReport[] = [];
  let chosen: Candidate<Row> | null = null;
  let best = Infinity;
  for (const c of candidates) {
    const preds = heldOut.rows.map((row) => c.predict(row));
    const obs = (idx: readonly number[]): Observation[] => idx.map((i) => withAux(preds[i]!, ys[i]!));
    const cals = [calibrate(obs(halves[0]), c.score, { alpha, minN }), calibrate(obs(halves[1]), c.score, { alpha, minN })] as const;
    const q = cals.map((cal) => (cal.status === 'calibrated' ? cal.q : Infinity)) as [number, number];
    let numCovered = 0;
    let sumBound = 0;
    let numEvaluated = 0;
    let uncalibrated = false;
    for (const h of [0, 1] as const) {
      const cal = cals[1 - h]!;
      if (cal.status !== 'calibrated') {
        uncalibrated = true;
        continue;
      }
      for (const i of halves[h]) {
        const p = preds[i]!;
        const b = c.score.bound(p.yhat, cal.q, p.aux);
        numEvaluated++;
        sumBound += b;
        if (ys[i]! <= b) numCovered++;
      }
    }
    const coverage = uncalibrated ? NaN : numCovered / numEvaluated;
    const meanBound = uncalibrated ? Infinity : sumBound / numEvaluated;
    const eligible = coverage >= 1 - alpha && Number.isFinite(meanBound);
    table.push({ score: c.score.name, level: c.level, coverage, meanBound, q, eligible });
    if (eligible && meanBound < best) {
      best = meanBound;
      chosen = c;
    }
  }
  return { chosen, table };
}

function withAux(p: Prediction, y: number): Observation {
  return p.aux === undefined ? { yhat: p.yhat, y } : { yhat: p.yhat, y, aux: p.aux };
}
