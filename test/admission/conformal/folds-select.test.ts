import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { holdOutSlice, splitFolds, type Fold } from '../../../src/admission/conformal/folds.ts';
import { selectScoreAndLevel, type Candidate } from '../../../src/admission/conformal/select.ts';
import { absoluteScore, ratioScore, scaledScore } from '../../../src/admission/conformal/score.ts';
import { Rng } from '../../../src/util/rng.ts';

interface Row {
  readonly round: number;
  readonly load: number;
  /** Position inside its (round, load) block. */
  readonly t: number;
  readonly yMs: number;
  /** The "model's" predictions at two base levels, and its interval width. */
  readonly q50: number;
  readonly q90: number;
  readonly width: number;
}

/** Six collection rounds × three loads; latency grows with load and with time inside a block (a filling queue). */
function collect(seed: number): Row[] {
  const rng = new Rng(seed, 'folds');
  const rows: Row[] = [];
  for (let round = 0; round < 6; round++) {
    for (const load of [0.2, 1, 5]) {
      for (let t = 0; t < 150; t++) {
        const median = 500 * load * (1 + t / 150);
        const yMs = median * Math.exp(0.6 * rng.normal());
        rows.push({ round, load, t, yMs, q50: median, q90: median * Math.exp(0.6 * 1.2816), width: median });
      }
    }
  }
  return rows;
}

const byRound = (r: Row): number => r.round;

describe('folds by whole group', () => {
  it('keeps every group whole, in input order, in exactly one fold', () => {
    const rows = collect(1);
    const f = splitFolds(rows, byRound, { train: [0, 1, 2], calibration: [3], test: [4] });
    assert.deepEqual(f.train.groups, [0, 1, 2]);
    assert.equal(f.train.rows.length, 3 * 450);
    assert.equal(f.calibration.rows.length, 450);
    assert.equal(f.test.rows.length, 450);
    assert.equal(f.numUnassigned, 450); // round 5 named nowhere: counted, not silently folded in
    for (const fold of [f.train, f.calibration, f.test]) {
      // Every block appears with all of its positions: no split by time inside a block.
      const perBlock = new Map<string, number>();
      for (const r of fold.rows) perBlock.set(`${r.round}/${r.load}`, (perBlock.get(`${r.round}/${r.load}`) ?? 0) + 1);
      for (const count of perBlock.values()) assert.equal(count, 150);
      assert.deepEqual(fold.rows, rows.filter((r) => fold.hasGroup(r.round)));
    }
    assert.throws(() => splitFolds(rows, byRound, { train: [0, 1], calibration: [1], test: [2] }), /expected each group in one fold, got 1 in train and calibration/);
  });

  it('carves the held-out slice from the training fold only', () => {
    const f = splitFolds(collect(2), byRound, { train: [0, 1, 2, 3], calibration: [4], test: [5] });
    const { fit, heldOut } = holdOutSlice(f.train, [2, 3]);
    assert.deepEqual(fit.groups, [0, 1]);
    assert.deepEqual(heldOut.groups, [2, 3]);
    assert.equal(heldOut.role, 'heldout');
    assert.throws(() => holdOutSlice(f.train, [5]), /expected groups of the training fold, got 5/);
    assert.throws(() => holdOutSlice(f.train, [0, 1, 2, 3]), /expected between 1 and 3 held-out groups, got 4/);
    // The types refuse the other folds; at run time a cast is caught too.
    // @ts-expect-error the test fold is not a training fold
    assert.throws(() => holdOutSlice(f.test, [5]), /bug: holdOutSlice takes the training fold, got the test fold/);
  });
});

describe('choosing the score and base level on the held-out slice', () => {
  const candidates: Candidate<Row>[] = [
    { score: absoluteScore, level: 0.9, predict: (r) => ({ yhat: r.q90 }) },
    { score: ratioScore, level: 0.9, predict: (r) => ({ yhat: r.q90 }) },
    { score: ratioScore, level: 0.5, predict: (r) => ({ yhat: r.q50 }) },
    { score: scaledScore(), level: 0.5, predict: (r) => ({ yhat: r.q50, aux: r.width }) },
  ];

  it('picks the narrowest mean bound at nominal coverage, and reports the whole table', () => {
    const f = splitFolds(collect(3), byRound, { train: [0, 1, 2, 3], calibration: [4], test: [5] });
    const { heldOut } = holdOutSlice(f.train, [1, 2, 3]);
    const sel = selectScoreAndLevel(heldOut, candidates, { alpha: 0.05, latencyOf: (r) => r.yMs });
    console.log(sel.table.map((l) => `${l.score}@${l.level}: coverage ${l.coverage.toFixed(3)} mean bound ${l.meanBound.toFixed(0)}`).join('; '));
    assert.equal(sel.table.length, 4);
    for (const line of sel.table) assert.ok(line.coverage >= 0.9, `${line.score}@${line.level} covered ${line.coverage}`);
    // (Here the mean is dominated by the slow blocks, where the additive correction is tightest, so
    // absolute wins on this criterion while over-covering the fast blocks; the table shows it.)
    assert.ok(sel.chosen !== null);
    const best = Math.min(...sel.table.filter((l) => l.eligible).map((l) => l.meanBound));
    assert.equal(sel.table[candidates.indexOf(sel.chosen)]!.meanBound, best);
  });

  it('reads only the held-out rows: the test fold is neither an argument nor ever predicted on', () => {
    const rows = collect(4);
    const f = splitFolds(rows, byRound, { train: [0, 1, 2, 3], calibration: [4], test: [5] });
    const { heldOut } = holdOutSlice(f.train, [2, 3]);
    const seen = new Set<Row>();
    const spy: Candidate<Row>[] = candidates.map((c) => ({ ...c, predict: (r: Row) => (seen.add(r), c.predict(r)) }));
    const latencies = new Set<Row>();
    selectScoreAndLevel(heldOut, spy, { alpha: 0.1, latencyOf: (r) => (latencies.add(r), r.yMs) });
    for (const r of [...seen, ...latencies]) assert.ok(r.round === 2 || r.round === 3, `read a row of round ${r.round}`);
    assert.equal(seen.size, 900);
    const asHeldOut = (fold: unknown) => fold as Fold<'heldout', Row>;
    // @ts-expect-error a test fold is not a held-out slice
    assert.throws(() => selectScoreAndLevel(f.test, candidates, { alpha: 0.1, latencyOf: (r) => r.yMs }), /bug: selection reads only a held-out slice of the training fold, got the test fold/);
    assert.throws(() => selectScoreAndLevel(asHeldOut(f.calibration), candidates, { alpha: 0.1, latencyOf: (r) => r.yMs }), /got the calibration fold/);
  });

  it('an uncalibratable slice chooses nothing rather than something unmeasured', () => {
    const f = splitFolds(collect(5).filter((r) => r.t < 20), byRound, { train: [0, 1, 2], calibration: [3], test: [4] });
    const { heldOut } = holdOutSlice(f.train, [1, 2]); // 60 rows per half < minN 100
    const sel = selectScoreAndLevel(heldOut, candidates, { alpha: 0.1, latencyOf: (r) => r.yMs });
    assert.equal(sel.chosen, null);
    assert.ok(sel.table.every((l) => !l.eligible && Number.isNaN(l.coverage)));
  });
});
