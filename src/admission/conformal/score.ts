// One-sided nonconformity scores and their inverses.
//
// A score measures how badly a base prediction ŷ under-predicted an observed latency y; larger is
// worse, and only being too slow counts (the SLO is one-sided). Conformal validity holds for any
// score, so the choice only decides the bound's width (the reference measured absolute scores
// pricing a 0.6 s request at 33 s, and a ratio score fixing that).
//
// Invariant (the one validity needs, tested in floating point, not just algebra):
//   y ≤ bound(ŷ, q, aux)  ⇔  score(ŷ, y, aux) ≤ q        for every finite y in the score's domain.
// Naive algebraic inverses miss this by a few ulps (expm1(log1p(·)) is not exact), and an ulp on
// the wrong side is a request admitted that the calibration never covered. So `bound` computes the
// algebraic inverse and then moves it to the largest float whose score is still ≤ q: a few extra
// score evaluations, at most ~70 where the score is flat over many floats; O(1) either way.
//
// Domains: absolute takes any finite ŷ, y; ratio needs ŷ, y > −1 (latencies are ≥ 0); scaled needs
// a finite scale σ̂ > 0. An input outside the domain is a caller's bug and throws.

import { bug } from '../../util/bug.ts';

/** A one-sided nonconformity score with its exact inverse. */
export interface Score {
  /** Stable label for /stats and reports: 'absolute', 'ratio', 'scaled'. */
  readonly name: string;
  /** How far y sits above the prediction, in this score's units. `aux`: a second predictor input (σ̂ for 'scaled'). */
  score(yhat: number, y: number, aux?: number): number;
  /** The largest latency whose score is ≤ q: the upper bound U = g(ŷ, q). q = +∞ gives +∞. */
  bound(yhat: number, q: number, aux?: number): number;
}

/** s = y − ŷ: one additive correction for every request. */
export const absoluteScore: Score = {
  name: 'absolute',
  score: (yhat, y) => {
    finite('absolute', 'yhat', yhat);
    finite('absolute', 'y', y);
    return y - yhat;
  },
  bound: (yhat, q) => {
    finite('absolute', 'yhat', yhat);
    return invert(absoluteScore, yhat, q, undefined, yhat + q);
  },
};

/** The smallest latency the ratio score takes (its domain is y > −1). */
const RATIO_FLOOR = -1 + Number.EPSILON / 2;

/** s = log1p(y) − log1p(ŷ): the correction is a multiplier, so it means the same at 0.5 s and 50 s. */
export const ratioScore: Score = {
  name: 'ratio',
  score: (yhat, y) => {
    aboveMinusOne('yhat', yhat);
    aboveMinusOne('y', y);
    return Math.log1p(y) - Math.log1p(yhat);
  },
  bound: (yhat, q) => {
    aboveMinusOne('yhat', yhat);
    return invert(ratioScore, yhat, q, undefined, Math.expm1(Math.log1p(yhat) + q), RATIO_FLOOR);
  },
};

export interface ScaledScoreOptions {
  /** σ̂ as a fixed function of ŷ; without it σ̂ is the `aux` argument (e.g. q_hi − q_lo from the predictor). */
  readonly scale?: (yhat: number) => number;
}

/**
 * s = (y − ŷ) / σ̂: the locally weighted score. The reference saw it fail informatively when σ̂
 * collapses for the easiest requests (the quantile is then set by the narrowest interval), so
 * callers should floor σ̂ — it is theirs to choose, and validity does not depend on it.
 */
export function scaledScore(options: ScaledScoreOptions = {}): Score {
  const { scale } = options;
  if (scale !== undefined && typeof scale !== 'function') {
    throw new TypeError(`scaledScore: expected scale to be a function, got ${typeof scale}`);
  }
  const sigma = (yhat: number, aux: number | undefined): number => {
    const s = scale !== undefined ? scale(yhat) : aux;
    if (s === undefined) bug('scaled score needs aux (σ̂) or a scale function');
    if (!Number.isFinite(s) || s <= 0) bug(`scaled score expected σ̂ > 0, got ${s}`);
    return s;
  };
  const scaled: Score = {
    name: 'scaled',
    score: (yhat, y, aux) => {
      finite('scaled', 'yhat', yhat);
      finite('scaled', 'y', y);
      return (y - yhat) / sigma(yhat, aux);
    },
    bound: (yhat, q, aux) => {
      finite('scaled', 'yhat', yhat);
      return invert(scaled, yhat, q, aux, yhat + q * sigma(yhat, aux));
    },
  };
  return scaled;
}

// ---- helpers ----

/** Ulp steps tried before bisecting: the algebraic inverse is almost always within a few. */
const WALK_STEPS = 8;

/**
 * The largest float b ≥ `floor` with score(ŷ, b) ≤ q, starting from the algebraic inverse `guess`
 * (scores are non-decreasing in y). Walks a few ulps; where the score is flat over many floats (near
 * 0, or a large σ̂ absorbing small differences) it brackets by doubling and bisects in float order,
 * at most ~64 more evaluations. q = +∞ → +∞; nothing in the domain scoring ≤ q → `floor`.
 */
function invert(s: Score, yhat: number, q: number, aux: number | undefined, guess: number, floor = -Number.MAX_VALUE): number {
  if (Number.isNaN(q)) bug(`${s.name} bound asked for q = NaN`);
  if (q === Infinity) return Infinity;
  // The walk is on the decision path: no closure and no BigInt here (both allocate); bisect keeps them.
  let b = Number.isNaN(guess) ? floor : Math.min(Math.max(guess, floor), Number.MAX_VALUE);
  for (let i = 0; i < WALK_STEPS; i++) {
    if (s.score(yhat, b, aux) <= q) {
      if (b === Number.MAX_VALUE) return Infinity;
      const up = nextUp(b);
      if (!(s.score(yhat, up, aux) <= q)) return b;
      b = up;
    } else {
      if (b === floor) return floor;
      b = Math.max(nextDown(b), floor);
    }
  }
  return bisect((y) => s.score(yhat, y, aux) <= q, b, floor);
}

/** Largest float ≥ floor with ok() true, given that ok is monotone (true then false) — by keys in float order. */
function bisect(ok: (y: number) => boolean, from: number, floor: number): number {
  const floorKey = keyOf(floor);
  const maxKey = keyOf(Number.MAX_VALUE);
  let lo: bigint; // ok(lo) holds
  let hi: bigint; // ok(hi) fails
  const k = keyOf(from);
  if (ok(from)) {
    lo = k;
    for (let d = 1n; ; d *= 2n) {
      const next = k + d > maxKey ? maxKey : k + d;
      if (!ok(fromKey(next))) {
        hi = next;
        break;
      }
      if (next === maxKey) return Infinity;
      lo = next;
    }
  } else {
    hi = k;
    for (let d = 1n; ; d *= 2n) {
      const next = k - d < floorKey ? floorKey : k - d;
      if (ok(fromKey(next))) {
        lo = next;
        break;
      }
      if (next === floorKey) return floor;
      hi = next;
    }
  }
  while (hi - lo > 1n) {
    const mid = lo + (hi - lo) / 2n;
    if (ok(fromKey(mid))) lo = mid;
    else hi = mid;
  }
  return fromKey(lo);
}

const f64 = new Float64Array(1);
const i64 = new BigInt64Array(f64.buffer);

/** Floats mapped to integers in the same order, consecutive floats to consecutive integers (−0 → 0). */
function keyOf(x: number): bigint {
  f64[0] = Math.abs(x);
  return x < 0 ? -i64[0]! : i64[0]!;
}

function fromKey(k: bigint): number {
  i64[0] = k < 0n ? -k : k;
  return k < 0n ? -f64[0]! : f64[0]!;
}

// One float's bits as two 32-bit words (little-endian: [low, high]), for stepping without BigInt.
const bits = new Float64Array(1);
const words = new Uint32Array(bits.buffer);

/** Adds one to the magnitude's bits (away from zero), or subtracts one (towards it); the sign is the caller's. */
function stepMagnitude(x: number, away: boolean): number {
  bits[0] = x;
  if (away) {
    if (words[0] === 0xffffffff) {
      words[0] = 0;
      words[1]!++;
    } else words[0]!++;
  } else if (words[0] === 0) {
    words[0] = 0xffffffff;
    words[1]!--;
  } else words[0]!--;
  return bits[0];
}

/** The next float above x (x finite, below MAX_VALUE). */
export function nextUp(x: number): number {
  if (x === 0) return Number.MIN_VALUE;
  return stepMagnitude(x, x > 0);
}

/** The next float below x (x finite, above −MAX_VALUE). */
export function nextDown(x: number): number {
  if (x === 0) return -Number.MIN_VALUE;
  return stepMagnitude(x, x < 0);
}

function finite(name: string, what: string, x: number): void {
  if (!Number.isFinite(x)) bug(`${name} score expected a finite ${what}, got ${x}`);
}

function aboveMinusOne(what: string, x: number): void {
  if (!(Number.isFinite(x) && x > -1)) bug(`ratio score expected ${what} > −1, got ${x}`);
}
