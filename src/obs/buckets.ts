// Histogram bucket boundaries (seconds), chosen from the server's SLO rather than a library default.
//
// Why: Prometheus's histogram_quantile() interpolates linearly inside the bucket a quantile falls
// in. With the default buckets (… 1, 2.5, 5, 10 s) and a 4 s SLO, a p99 of 3.9 s and one of 4.6 s
// both land in (2.5, 5] and the interpolated answer can be off by more than a second — wrong by
// exactly the amount that decides "inside the SLO or not". So request-level latencies (TTFT, E2E,
// queue time) get buckets dense between 0.4× and 1.5× the SLO, the SLO itself as an exact
// boundary (`bucket{le=SLO} / count` is the attainment with no interpolation at all), and a coarse
// tail on either side to keep the series count small (25 buckets).
//
// Per-token latencies (ITL/TPOT) have no budget of their own, so their buckets are geometric — the
// same relative error everywhere, ±13% at most — from 0.5 ms up to the SLO: one gap longer than
// the whole budget is a miss whatever its exact size.
//
// Requests may carry their own `x-slo-ms`; the buckets follow the server's default, the budget
// most traffic runs under.

/** Fractions of the SLO used as boundaries for request-level latency histograms. */
export const SLO_FRACTIONS: readonly number[] = [
  0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1, 1.05, 1.1, 1.2, 1.35, 1.5, 2, 3, 5, 10,
];

/** Boundaries (s) for TTFT, E2E and queue time under a default SLO of `sloMs`. */
export function sloBuckets(sloMs: number): number[] {
  checkPositive('sloMs', sloMs);
  return uniqueSorted(SLO_FRACTIONS.map((f) => (f * sloMs) / 1000));
}

/** Boundaries (s) for inter-token latency: geometric, ratio 2^(1/3), from 0.5 ms up to the SLO. */
export function tokenLatencyBuckets(sloMs: number): number[] {
  checkPositive('sloMs', sloMs);
  return geometric(0.0005, Math.max(sloMs / 1000, 0.001), 2 ** (1 / 3));
}

/** Boundaries (s) for an engine step: 0.25 ms to ~10 s, ratio √2. */
export const stepBuckets = (): number[] => geometric(0.00025, 10, Math.SQRT2);

/**
 * Boundaries (s) for the API's admission decision: 1, 1.5, 2, 3, 5, 7 per decade from 1 µs to
 * 0.1 s. Powers of two (the first choice) put no boundary near the 200 µs target: a p99 between
 * 128 and 256 µs could not be told from one over 200 µs.
 */
export const admissionBuckets = (): number[] => uniqueSorted([-6, -5, -4, -3, -2].flatMap((e) => [1, 1.5, 2, 3, 5, 7].map((m) => m * 10 ** e)).concat(0.1));

function geometric(from: number, to: number, ratio: number): number[] {
  const out: number[] = [];
  for (let x = from; x < to * ratio; x *= ratio) out.push(x);
  return uniqueSorted(out);
}

/** Round to 6 significant digits (so labels read `le="0.3"`, not `0.30000000000000004`), sort, dedupe. */
function uniqueSorted(xs: number[]): number[] {
  return [...new Set(xs.map((x) => Number(x.toPrecision(6))))].sort((a, b) => a - b);
}

function checkPositive(name: string, v: number): void {
  if (!(Number.isFinite(v) && v > 0)) throw new Error(`buckets: expected ${name} > 0, got ${v}`);
}
