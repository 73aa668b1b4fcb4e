// Synthetic training sets for the predictor tests: y = f(x) + g(x)·ε with heteroscedastic noise,
// so a correct τ-quantile model has to track both the level f and the spread g.

import { Rng } from '../../../src/util/rng.ts';

export interface Dataset {
  readonly X: number[][];
  readonly y: number[];
}

/** f(x) = 2 + sin(4·x0) + 3·x1, g(x) = 0.2 + 1.5·x0, ε ~ N(0, 1); extra columns are noise. */
export function heteroscedastic(n: number, numFeatures: number, seed: number): Dataset {
  if (numFeatures < 2) throw new RangeError(`heteroscedastic: expected at least 2 features, got ${numFeatures}`);
  const rng = new Rng(seed, 'heteroscedastic');
  const X: number[][] = [];
  const y: number[] = [];
  for (let i = 0; i < n; i++) {
    const x = Array.from({ length: numFeatures }, () => rng.uniform());
    X.push(x);
    y.push(2 + Math.sin(4 * x[0]!) + 3 * x[1]! + (0.2 + 1.5 * x[0]!) * rng.normal());
  }
  return { X, y };
}

/** y independent of x: features that do not matter. */
export function pureNoise(n: number, numFeatures: number, seed: number): Dataset {
  const rng = new Rng(seed, 'noise');
  const X: number[][] = [];
  const y: number[] = [];
  for (let i = 0; i < n; i++) {
    X.push(Array.from({ length: numFeatures }, () => rng.uniform()));
    y.push(3 + rng.normal());
  }
  return { X, y };
}

/** The true conditional τ-quantile of `heteroscedastic` needs Φ⁻¹(τ); these are the levels tested. */
export const NORMAL_QUANTILE: Readonly<Record<number, number>> = { 0.5: 0, 0.9: 1.2815515655446004 };

/** Share of rows with y ≤ prediction. */
export function coverage(y: readonly number[], q: ArrayLike<number>): number {
  let hit = 0;
  for (let i = 0; i < y.length; i++) if (y[i]! <= q[i]!) hit++;
  return hit / y.length;
}
