// Analysis of raw records. Everything here is recomputed from rows, so any SLO can be applied
// after the fact. Only 'steady' rows (by intended arrival) enter the numbers; warm-up and
// cool-down rows stay in the file and are counted separately.
//
// Definitions (window_s = steady window length, from meta.json):
//   offered rate    steady arrivals / window_s
//   throughput      'ok' rows / window_s                    (vLLM: request_throughput)
//   goodput         'ok' rows with e2e <= slo / window_s    (vLLM: request_goodput)
//   SLO attainment  'ok' rows with e2e <= slo / steady arrivals (shed, failed and censored rows
//                   count as misses; a censored row is a miss unless the SLO exceeds the timeout,
//                   which is flagged)
//   latencies       from the intended arrival; TTFT over rows that got a first token, E2E over
//                   'ok' rows plus censored rows at +Infinity (so a quantile above the timeout
//                   reads as Infinity = "more than the timeout" rather than being hidden)
//   TPOT            (e2e - ttft) / (completion tokens - 1), per 'ok' row with >= 2 tokens
//   ITL             every gap between content chunks, pooled over 'ok' rows
import type { RequestRecord } from './record.ts';
import { mean, quantileSorted, sortedCopy, stdPop } from './stats.ts';

export interface ReportOptions {
  /** The E2E SLO in ms. */
  readonly sloMs: number;
  /** Steady window length in seconds. */
  readonly windowS: number;
  /** Client timeout in ms (to flag SLOs a censored row cannot be judged against). */
  readonly timeoutMs: number;
}

export interface LatencyStats {
  mean: number;
  median: number;
  std: number;
  p95: number;
  p99: number;
}

/** JSON-friendly summary; key names follow vLLM's bench-serve where one exists. */
export interface Summary {
  loop: string;
  slo_ms: number;
  window_s: number;
  num_rows: number;
  num_warmup: number;
  num_cooldown: number;
  num_arrivals: number;
  completed: number;
  num_shed: number;
  num_429: number;
  num_http_errors: number;
  num_transport_errors: number;
  num_timeouts: number;
  offered_rate: number;
  request_throughput: number;
  request_goodput: number;
  slo_attainment: number;
  slo_attainment_admitted: number;
  shed_rate: number;
  rate_429: number;
  total_input_tokens: number;
  total_output_tokens: number;
  output_throughput: number;
  total_token_throughput: number;
  mean_ttft_ms: number;
  median_ttft_ms: number;
  std_ttft_ms: number;
  p95_ttft_ms: number;
  p99_ttft_ms: number;
  mean_tpot_ms: number;
  median_tpot_ms: number;
  std_tpot_ms: number;
  p95_tpot_ms: number;
  p99_tpot_ms: number;
  mean_itl_ms: number;
  median_itl_ms: number;
  std_itl_ms: number;
  p95_itl_ms: number;
  p99_itl_ms: number;
  mean_e2el_ms: number;
  median_e2el_ms: number;
  std_e2el_ms: number;
  p95_e2el_ms: number;
  p99_e2el_ms: number;
  /** Actual send - intended arrival, in seconds, summarised the way inference-perf reports it. */
  schedule_delay: Record<string, number>;
  /** True when the SLO is longer than the client timeout, so censored rows cannot be judged. */
  slo_exceeds_timeout: boolean;
}

export interface ClassRow {
  klass: string;
  num_arrivals: number;
  completed: number;
  num_shed: number;
  goodput: number;
  slo_attainment: number;
  ttft: LatencyStats;
  e2el: LatencyStats;
}

/** Summary statistics with linear-interpolated quantiles; Infinity entries are censored values. */
export function latencyStats(values: Iterable<number>): LatencyStats {
  const sorted = sortedCopy(values);
  const finite = sorted.filter((v) => Number.isFinite(v));
  const allFinite = finite.length === sorted.length;
  return {
    mean: allFinite ? mean(finite) : Infinity,
    median: quantileSorted(sorted, 0.5),
    std: allFinite ? stdPop(finite) : NaN,
    p95: quantileSorted(sorted, 0.95),
    p99: quantileSorted(sorted, 0.99),
  };
}

const isGood = (r: RequestRecord, sloMs: number): boolean => r.outcome === 'ok' && r.e2e_ms !== null && r.e2e_ms <= sloMs;

export function summarize(records: readonly RequestRecord[], opts: ReportOptions): Summary {
  if (!(opts.windowS > 0)) throw new Error(`summarize: expected windowS > 0, got ${opts.windowS}`);
  const steady = records.filter((r) => r.phase === 'steady');
  const ok = steady.filter((r) => r.outcome === 'ok');
  const good = ok.filter((r) => isGood(r, opts.sloMs)).length;
  const shed = steady.filter((r) => r.outcome === 'shed').length;
  const n = steady.length;
  const tokensIn = ok.reduce((s, r) => s + (r.prompt_tokens ?? r.prompt_tokens_est), 0);
  const tokensOut = ok.reduce((s, r) => s + (r.completion_tokens ?? r.num_chunks), 0);
  const ttft = latencyStats(steady.filter((r) => r.ttft_ms !== null).map((r) => r.ttft_ms ?? NaN));
  const e2e = latencyStats(e2eValues(steady));
  const tpot = latencyStats(
    ok.flatMap((r) => {
      const toks = r.completion_tokens ?? r.num_chunks;
      return toks >= 2 && r.ttft_ms !== null && r.e2e_ms !== null ? [(r.e2e_ms - r.ttft_ms) / (toks - 1)] : [];
    }),
  );
  const itl = latencyStats(ok.flatMap((r) => r.itl_ms));
  const slip = sortedCopy(steady.map((r) => r.slip_ms / 1000));
  const w = opts.windowS;
  const frac = (k: number): number => (n === 0 ? NaN : k / n);
  return {
    loop: [...new Set(records.map((r) => r.loop))].join('+') || 'none',
    slo_ms: opts.sloMs,
    window_s: w,
    num_rows: records.length,
    num_warmup: records.filter((r) => r.phase === 'warmup').length,
    num_cooldown: records.filter((r) => r.phase === 'cooldown').length,
    num_arrivals: n,
    completed: ok.length,
    num_shed: shed,
    num_429: steady.filter((r) => r.http_status === 429).length,
    num_http_errors: steady.filter((r) => r.outcome === 'http_error').length,
    num_transport_errors: steady.filter((r) => r.outcome === 'transport_error').length,
    num_timeouts: steady.filter((r) => r.censored).length,
    offered_rate: n / w,
    request_throughput: ok.length / w,
    request_goodput: good / w,
    slo_attainment: frac(good),
    slo_attainment_admitted: n - shed === 0 ? NaN : good / (n - shed),
    shed_rate: frac(shed),
    rate_429: frac(steady.filter((r) => r.http_status === 429).length),
    total_input_tokens: tokensIn,
    total_output_tokens: tokensOut,
    output_throughput: tokensOut / w,
    total_token_throughput: (tokensIn + tokensOut) / w,
    ...prefixed('ttft', ttft),
    ...prefixed('tpot', tpot),
    ...prefixed('itl', itl),
    ...prefixed('e2el', e2e),
    schedule_delay: {
      mean: mean(slip),
      min: slip[0] ?? NaN,
      p10: quantileSorted(slip, 0.1),
      median: quantileSorted(slip, 0.5),
      p90: quantileSorted(slip, 0.9),
      p99: quantileSorted(slip, 0.99),
      max: slip[slip.length - 1] ?? NaN,
    },
    slo_exceeds_timeout: opts.sloMs > opts.timeoutMs,
  };
}

/** E2E over 'ok' rows, plus censored rows as +Infinity. */
function e2eValues(rows: readonly RequestRecord[]): number[] {
  return rows.flatMap((r) => (r.outcome === 'ok' && r.e2e_ms !== null ? [r.e2e_ms] : r.censored ? [Infinity] : []));
}

function prefixed<K extends string>(name: K, s: LatencyStats) {
  return {
    [`mean_${name}_ms`]: s.mean,
    [`median_${name}_ms`]: s.median,
    [`std_${name}_ms`]: s.std,
    [`p95_${name}_ms`]: s.p95,
    [`p99_${name}_ms`]: s.p99,
  } as Record<`${'mean' | 'median' | 'std' | 'p95' | 'p99'}_${K}_ms`, number>;
}

/** Per workload class (short/medium/long, shared/unique, ...), steady rows only. */
export function byClass(records: readonly RequestRecord[], opts: ReportOptions): ClassRow[] {
  const steady = records.filter((r) => r.phase === 'steady');
  const classes = [...new Set(steady.map((r) => r.klass))].sort();
  return classes.map((klass) => {
    const rows = steady.filter((r) => r.klass === klass);
    const good = rows.filter((r) => isGood(r, opts.sloMs)).length;
    return {
      klass,
      num_arrivals: rows.length,
      completed: rows.filter((r) => r.outcome === 'ok').length,
      num_shed: rows.filter((r) => r.outcome === 'shed').length,
      goodput: good / opts.windowS,
      slo_attainment: rows.length === 0 ? NaN : good / rows.length,
      ttft: latencyStats(rows.filter((r) => r.ttft_ms !== null).map((r) => r.ttft_ms ?? NaN)),
      e2el: latencyStats(e2eValues(rows)),
    };
  });
}

export interface SensitivityRow {
  slo_ms: number;
  goodput: number;
  slo_attainment: number;
}

/** Goodput and attainment at each SLO, from the same rows: shows how much hangs on the choice. */
export function sloSensitivity(records: readonly RequestRecord[], slosMs: readonly number[], windowS: number): SensitivityRow[] {
  const steady = records.filter((r) => r.phase === 'steady');
  return slosMs.map((slo) => {
    const good = steady.filter((r) => isGood(r, slo)).length;
    return { slo_ms: slo, goodput: good / windowS, slo_attainment: steady.length === 0 ? NaN : good / steady.length };
  });
}

/** Median E2E of 'ok' rows in successive windows of intended arrival (the overload signature). */
export function windowedMedianE2e(records: readonly RequestRecord[], startMs: number, windowMs: number, numWindows: number): number[] {
  const out: number[] = [];
  for (let k = 0; k < numWindows; k++) {
    const lo = startMs + k * windowMs;
    const rows = records.filter((r) => r.intended_ms >= lo && r.intended_ms < lo + windowMs);
    out.push(quantileSorted(sortedCopy(e2eValues(rows)), 0.5));
  }
  return out;
}
