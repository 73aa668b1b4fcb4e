// The numbers behind a single run's figures, as rows Vega-Lite reads, computed from raw records
// only (no clock), so the same folder always gives the same page. Definitions follow report.ts:
// latencies are from the intended arrival; CDFs and goodput use 'steady' rows; a censored (timed
// out) row counts in the E2E CDF's denominator but never reaches it, so the curve stops below 1 by
// the censored share instead of hiding it. Series over time use every row (the warm-up and
// cool-down edges are drawn as such), in buckets of whole seconds plotted at their midpoints.
import type { RequestRecord } from '../record.ts';
import { sloSensitivity } from '../report.ts';
import type { SensitivityRow } from '../report.ts';
import { quantileSorted, sortedCopy } from '../stats.ts';

/** One point of an empirical CDF: the share of the series' rows with latency <= latency_ms. */
export interface CdfPoint {
  readonly series: string;
  readonly latency_ms: number;
  readonly share: number;
}

/** One value of one series in one time bucket. */
export interface TimePoint {
  readonly series: string;
  /** The bucket's midpoint, seconds from the run's start. */
  readonly t_s: number;
  readonly value: number;
}

/** A CDF keeps at most this many points per series: past it, evenly spaced ranks plus the max. */
const MAX_CDF_POINTS = 1000;
/** Buckets over time stay at or under this many: the bucket widens to the next of BUCKETS_S. */
const MAX_BUCKETS = 300;
const BUCKETS_S = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600];

const steadyRows = (records: readonly RequestRecord[]): RequestRecord[] => records.filter((r) => r.phase === 'steady');

/** TTFT (rows that got a first token) and E2E ('ok' rows; censored rows in the denominator) CDFs. */
export function latencyCdfs(records: readonly RequestRecord[]): CdfPoint[] {
  const steady = steadyRows(records);
  const ttft = steady.flatMap((r) => (r.ttft_ms === null ? [] : [r.ttft_ms]));
  const e2e = steady.flatMap((r) => (r.outcome === 'ok' && r.e2e_ms !== null ? [r.e2e_ms] : []));
  const numCensored = steady.filter((r) => r.censored).length;
  return [...cdf('TTFT', ttft, ttft.length), ...cdf('E2E', e2e, e2e.length + numCensored)];
}

function cdf(series: string, values: readonly number[], denominator: number): CdfPoint[] {
  const sorted = sortedCopy(values);
  const n = sorted.length;
  const ranks = n <= MAX_CDF_POINTS ? Array.from({ length: n }, (_, i) => i) : Array.from({ length: MAX_CDF_POINTS }, (_, k) => Math.round((k * (n - 1)) / (MAX_CDF_POINTS - 1)));
  return ranks.map((i) => ({ series, latency_ms: sorted[i] ?? NaN, share: (i + 1) / denominator }));
}

/** Goodput at SLOs from near 0 to past the slowest 'ok' row (and 2x the run's SLO), plus the run's SLO itself. */
export function goodputBySlo(records: readonly RequestRecord[], sloMs: number, windowS: number): SensitivityRow[] {
  const e2e = steadyRows(records).flatMap((r) => (r.outcome === 'ok' && r.e2e_ms !== null ? [r.e2e_ms] : []));
  const maxMs = e2e.reduce((m, v) => Math.max(m, v * 1.1), 2 * sloMs);
  const numSteps = 80;
  const grid = Array.from({ length: numSteps }, (_, k) => ((k + 1) * maxMs) / numSteps);
  return sloSensitivity(records, [...new Set([...grid, sloMs])].sort((a, b) => a - b), windowS);
}

/** The bucket width for a run lasting spanS seconds: the narrowest of BUCKETS_S that keeps <= MAX_BUCKETS. */
export function bucketWidthS(spanS: number): number {
  return BUCKETS_S.find((w) => spanS / w <= MAX_BUCKETS) ?? Math.ceil(spanS / MAX_BUCKETS);
}

/** The run's span in seconds: to the last row's end (requests drain past the arrivals). */
export function spanS(records: readonly RequestRecord[], durationS: number): number {
  return records.reduce((m, r) => Math.max(m, r.end_ms / 1000), durationS);
}

/** Buckets of widthS seconds over [0, span); the last one ends at the span, so it may be shorter. */
export class Buckets {
  readonly widthS: number;
  readonly spanS: number;
  readonly numBuckets: number;

  constructor(spanS: number) {
    if (!(spanS > 0)) throw new Error(`Buckets: expected a span > 0 s, got ${spanS}`);
    this.spanS = spanS;
    this.widthS = bucketWidthS(spanS);
    this.numBuckets = Math.ceil(spanS / this.widthS);
  }

  /** The bucket of a time in ms from the run's start (times at or past the span go to the last). */
  indexOf(ms: number): number {
    return Math.max(0, Math.min(this.numBuckets - 1, Math.floor(ms / 1000 / this.widthS)));
  }

  lengthS(b: number): number {
    return Math.min(this.widthS, this.spanS - b * this.widthS);
  }

  midS(b: number): number {
    return b * this.widthS + this.lengthS(b) / 2;
  }

  /** Per-second rates of `series` from event times in ms. */
  rates(series: string, timesMs: Iterable<number>): TimePoint[] {
    const n = new Array<number>(this.numBuckets).fill(0);
    for (const t of timesMs) {
      const b = this.indexOf(t);
      n[b] = (n[b] ?? 0) + 1;
    }
    return n.map((k, b) => ({ series, t_s: this.midS(b), value: k / this.lengthS(b) }));
  }
}

/**
 * Per second: arrivals (by intended arrival), completed, refused (503/429) and failed (errors and
 * timeouts; only when there are any) by when the row ended.
 */
export function ratesOverTime(records: readonly RequestRecord[], buckets: Buckets): TimePoint[] {
  const ended = (keep: (r: RequestRecord) => boolean): number[] => records.filter(keep).map((r) => r.end_ms);
  const failed = ended((r) => r.outcome === 'http_error' || r.outcome === 'transport_error' || r.outcome === 'timeout');
  return [
    ...buckets.rates('arrivals/s', records.map((r) => r.intended_ms)),
    ...buckets.rates('completed/s', ended((r) => r.outcome === 'ok')),
    ...buckets.rates('refused/s', ended((r) => r.outcome === 'shed')),
    ...(failed.length > 0 ? buckets.rates('failed/s', failed) : []),
  ];
}

/** Streamed content chunks (≈ output tokens) per second: each at intended + TTFT + the gaps before it. */
export function chunksOverTime(records: readonly RequestRecord[], buckets: Buckets): TimePoint[] {
  const times: number[] = [];
  for (const r of records) {
    if (r.ttft_ms === null) continue;
    let t = r.intended_ms + r.ttft_ms;
    times.push(t);
    for (const gap of r.itl_ms) times.push((t += gap));
  }
  return buckets.rates('chunks/s', times);
}

/**
 * Latency of the requests that arrived in each bucket (by intended arrival): TTFT median, E2E
 * median and p99 in ms. A censored row is E2E +Infinity, drawn at the timeout; a bucket with no
 * such row has no point.
 */
export function latencyOverTime(records: readonly RequestRecord[], buckets: Buckets, timeoutMs: number): TimePoint[] {
  const rows: RequestRecord[][] = Array.from({ length: buckets.numBuckets }, () => []);
  for (const r of records) rows[buckets.indexOf(r.intended_ms)]?.push(r);
  const clip = (v: number): number => (v === Infinity ? timeoutMs : v);
  return rows.flatMap((rs, b) => {
    const t_s = buckets.midS(b);
    const ttft = sortedCopy(rs.flatMap((r) => (r.ttft_ms === null ? [] : [r.ttft_ms])));
    const e2e = sortedCopy(rs.flatMap((r) => (r.outcome === 'ok' && r.e2e_ms !== null ? [r.e2e_ms] : r.censored ? [Infinity] : [])));
    const out: TimePoint[] = [];
    if (ttft.length > 0) out.push({ series: 'TTFT p50', t_s, value: quantileSorted(ttft, 0.5) });
    if (e2e.length > 0) out.push({ series: 'E2E p50', t_s, value: clip(quantileSorted(e2e, 0.5)) }, { series: 'E2E p99', t_s, value: clip(quantileSorted(e2e, 0.99)) });
    return out;
  });
}
