// Marginal coverage by Monte Carlo: thousands of fresh calibration sets, each scored on fresh test
// points, with predictors that know nothing about the latency — validity must not depend on the model.
//
// For continuous scores the marginal coverage is exactly k/(n+1), k = ⌈(n+1)(1−α)⌉, so the mean over
// trials must land in [1−α, 1−α + 1/(n+1)) up to Monte Carlo error. The tolerance is 4 standard errors
// of that mean, measured from the trials themselves.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { calibrate, type Observation } from '../../../src/admission/conformal/quantile.ts';
import { absoluteScore, ratioScore, scaledScore, type Score } from '../../../src/admission/conformal/score.ts';
import { Rng } from '../../../src/util/rng.ts';

const TRIALS = 2000;
const N = 200;
const TEST_POINTS = 200;

interface Useless {
  readonly name: string;
  readonly score: Score;
  /** A prediction drawn without looking at y. */
  predict(rng: Rng): { yhat: number; aux?: number };
}

const predictors: Useless[] = [
  { name: 'constant ŷ = 1 s, ratio score', score: ratioScore, predict: () => ({ yhat: 1000 }) },
  { name: 'random ŷ ~ U(0, 5 s), absolute score', score: absoluteScore, predict: (rng) => ({ yhat: 5000 * rng.uniform() }) },
  { name: 'random ŷ and random σ̂, scaled score', score: scaledScore(), predict: (rng) => ({ yhat: 5000 * rng.uniform(), aux: 10 + 990 * rng.uniform() }) },
];

/** A latency in ms: lognormal around 1.1 s, the shape of an output-length-dominated workload. */
const latency = (rng: Rng): number => rng.lognormal(7, 0.8);

function draw(rng: Rng, p: Useless): Observation {
  const { yhat, aux } = p.predict(rng);
  const y = latency(rng);
  return aux === undefined ? { yhat, y } : { yhat, y, aux };
}

describe('split conformal: marginal coverage over fresh calibration sets', () => {
  for (const alpha of [0.2, 0.1, 0.05]) {
    for (const [i, p] of predictors.entries()) {
      it(`α = ${alpha}, ${p.name}: mean coverage in [1−α, 1−α + 1/(n+1)] ± 4 SE`, () => {
        const rng = new Rng(1000 + i, `coverage-${alpha}`);
        let sum = 0;
        let sumSq = 0;
        for (let t = 0; t < TRIALS; t++) {
          const cal = calibrate(Array.from({ length: N }, () => draw(rng, p)), p.score, { alpha });
          if (cal.status !== 'calibrated') throw new Error(`bug: n = ${N} did not calibrate at α = ${alpha}`);
          let covered = 0;
          for (let j = 0; j < TEST_POINTS; j++) {
            const o = draw(rng, p);
            if (o.y <= p.score.bound(o.yhat, cal.q, o.aux)) covered++;
          }
          const c = covered / TEST_POINTS;
          sum += c;
          sumSq += c * c;
        }
        const mean = sum / TRIALS;
        const se = Math.sqrt((sumSq / TRIALS - mean * mean) / TRIALS);
        const lo = 1 - alpha;
        const hi = 1 - alpha + 1 / (N + 1);
        console.log(`coverage α=${alpha} ${p.name}: mean ${mean.toFixed(4)} (SE ${se.toFixed(4)}), theory ${(Math.ceil((N + 1) * (1 - alpha) - 1e-9) / (N + 1)).toFixed(4)}, band [${lo.toFixed(4)}, ${hi.toFixed(4)}]`);
        assert.ok(mean >= lo - 4 * se, `coverage ${mean} below 1−α = ${lo} by more than 4 SE (${se})`);
        assert.ok(mean <= hi + 4 * se, `coverage ${mean} above 1−α + 1/(n+1) = ${hi} by more than 4 SE (${se})`);
      });
    }
  }
});
