// The arrival process of an open-loop run: a list of intended send times, fixed before the run
// starts and written to disk with it. The generator never moves an arrival because the server is
// slow; it only records how late it actually sent (slip).
//
//   poisson  gaps ~ Exp(rate)                       (CV 1)
//   gamma    gaps ~ Gamma(shape, 1/(shape*rate))    (mean 1/rate, CV 1/sqrt(shape); shape 1 = Poisson)
//   fixed    gaps = 1/rate                          (CV 0; understates queueing, kept for comparison)
import { Rng } from '../util/rng.ts';

export type ArrivalKind = 'poisson' | 'gamma' | 'fixed';

export interface ArrivalOptions {
  /** Which process generates the gaps. */
  readonly kind: ArrivalKind;
  /** Mean arrivals per second. */
  readonly ratePerS: number;
  /** Arrivals are generated on [0, durationS). */
  readonly durationS: number;
  /** Gamma shape; ignored by the other kinds. */
  readonly gammaShape: number;
  /** Run seed; the arrival stream is derived from it under the name 'arrivals'. */
  readonly seed: number;
}

/** Intended arrival offsets in ms from the run's start, ascending. */
export function arrivalTimesMs(opts: ArrivalOptions): Float64Array {
  if (!(opts.ratePerS > 0)) throw new Error(`arrivals: expected rate > 0, got ${opts.ratePerS}`);
  if (!(opts.durationS > 0)) throw new Error(`arrivals: expected duration > 0, got ${opts.durationS}`);
  if (opts.kind === 'gamma' && !(opts.gammaShape > 0)) {
    throw new Error(`arrivals: expected gamma shape > 0, got ${opts.gammaShape}`);
  }
  const rng = new Rng(opts.seed, 'arrivals');
  const out: number[] = [];
  const endMs = opts.durationS * 1000;
  const meanGapMs = 1000 / opts.ratePerS;
  // The first arrival is itself one gap after t=0, so the count on [0, T) is Poisson(rate*T).
  let t = 0;
  for (;;) {
    t += nextGapMs(rng, opts, meanGapMs);
    if (t >= endMs) break;
    out.push(t);
  }
  return Float64Array.from(out);
}

function nextGapMs(rng: Rng, opts: ArrivalOptions, meanGapMs: number): number {
  switch (opts.kind) {
    case 'poisson':
      return rng.exponential(1) * meanGapMs;
    case 'gamma':
      return rng.gamma(opts.gammaShape, meanGapMs / opts.gammaShape);
    case 'fixed':
      return meanGapMs;
  }
}

/** Successive differences, with the first gap measured from 0. */
export function gapsOf(timesMs: ArrayLike<number>): number[] {
  const gaps: number[] = [];
  let prev = 0;
  for (let i = 0; i < timesMs.length; i++) {
    const t = timesMs[i] ?? 0;
    gaps.push(t - prev);
    prev = t;
  }
  return gaps;
}
