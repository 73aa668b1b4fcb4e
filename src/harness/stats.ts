// Small, exact statistics the report and the validation share. Quantiles interpolate linearly
// between order statistics (numpy's default, which vLLM's bench-serve uses), so numbers line up
// with what users already read.

/**
 * The q-quantile (q in [0, 1]) of a sample by linear interpolation between order statistics.
 * `sorted` must be ascending. +Infinity entries stand for right-censored values (a client timeout:
 * the latency is known only to exceed the timeout); a quantile that lands on or next to one is
 * +Infinity, i.e. "above the timeout". NaN for an empty sample.
 */
export function quantileSorted(sorted: ArrayLike<number>, q: number): number {
  const n = sorted.length;
  if (n === 0) return NaN;
  const pos = (n - 1) * q;
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  const a = sorted[lo] ?? NaN;
  const b = sorted[hi] ?? NaN;
  if (lo === hi) return a;
  if (b === Infinity) return Infinity;
  return a + (b - a) * (pos - lo);
}

export function sortedCopy(xs: Iterable<number>): Float64Array {
  return Float64Array.from(xs).sort();
}

export function mean(xs: ArrayLike<number>): number {
  if (xs.length === 0) return NaN;
  let s = 0;
  for (let i = 0; i < xs.length; i++) s += xs[i] ?? 0;
  return s / xs.length;
}

/** Population standard deviation (numpy's np.std default, as bench-serve reports it). */
export function stdPop(xs: ArrayLike<number>): number {
  if (xs.length === 0) return NaN;
  const m = mean(xs);
  let s = 0;
  for (let i = 0; i < xs.length; i++) s += ((xs[i] ?? 0) - m) ** 2;
  return Math.sqrt(s / xs.length);
}

/** Sample standard deviation (n - 1). */
export function stdSample(xs: ArrayLike<number>): number {
  if (xs.length < 2) return NaN;
  const m = mean(xs);
  let s = 0;
  for (let i = 0; i < xs.length; i++) s += ((xs[i] ?? 0) - m) ** 2;
  return Math.sqrt(s / (xs.length - 1));
}

export interface KsResult {
  /** Sample size. */
  readonly n: number;
  /** sup |F_n(x) - F(x)|. */
  readonly d: number;
  /** Two-sided p-value. */
  readonly pValue: number;
}

/**
 * One-sample Kolmogorov–Smirnov test of gaps against Exp(rate) with the rate *given*, not fitted.
 * Because no parameter is estimated from the sample the KS null distribution applies as is (a
 * fitted rate would need Lilliefors' table). The p-value uses the asymptotic Kolmogorov
 * distribution with Stephens' small-sample correction, accurate to a few parts in 1,000 for n >= 5.
 */
export function ksExponential(gaps: ArrayLike<number>, rate: number): KsResult {
  const sorted = sortedCopy(Array.from(gaps));
  const n = sorted.length;
  if (n === 0) return { n: 0, d: NaN, pValue: NaN };
  let d = 0;
  for (let i = 0; i < n; i++) {
    const f = 1 - Math.exp(-rate * (sorted[i] ?? 0));
    d = Math.max(d, (i + 1) / n - f, f - i / n);
  }
  const sqrtN = Math.sqrt(n);
  return { n, d, pValue: kolmogorovQ((sqrtN + 0.12 + 0.11 / sqrtN) * d) };
}

/** Q_KS(x) = 2 Σ (-1)^(k-1) exp(-2 k² x²): the Kolmogorov survival function. */
export function kolmogorovQ(x: number): number {
  if (x <= 0) return 1;
  if (x < 0.2) return 1;
  let sum = 0;
  for (let k = 1; k <= 100; k++) {
    const term = Math.exp(-2 * k * k * x * x);
    sum += (k % 2 === 1 ? 1 : -1) * term;
    if (term < 1e-12) break;
  }
  return Math.min(1, Math.max(0, 2 * sum));
}
