// The study's decisions, computed from summary rows only (the rows summary.csv holds), so that
// analysis.json can be recomputed from the committed CSV and checked.
//
// Matched medians: for every configuration, the median over its repeats of each metric (repeat r
// used the same seed in every configuration). The request-cap rule, after the reference study:
// the smallest cap whose steady RPS is within `toleranceShare` of the best cap's; the next larger
// cap is its comparison boundary and both get three repeats. The mixed-size rule: input-token
// admission advances only if, on matched medians, it serves at least the request cap's steady RPS
// and a short-request p95 TTFT no worse; the input-plus-output estimate advances only if its RPS
// is at least (1 − toleranceShare) of the request cap's.
import { quantileSorted, sortedCopy } from '../stats.ts';

/** The metrics summary.csv carries per point and analysis.json carries as matched medians. */
export const MEDIAN_METRICS = [
  'steady_rps', 'p50_ttft_ms', 'p95_ttft_ms', 'p99_ttft_ms', 'rate_429',
  'p95_ttft_short_ms', 'p95_ttft_medium_ms', 'p95_ttft_long_ms', 'input_tokens_per_s',
] as const;
export type MedianMetric = (typeof MEDIAN_METRICS)[number];

/** What the analysis needs of a summary row; numbers may be NaN (an empty CSV field). */
export interface SummaryFacts {
  readonly phase: string;
  readonly config: string;
  readonly cap_kind: string;
  readonly level: string;
  readonly cap_value: number;
  readonly repeat: number;
  readonly metrics: Readonly<Record<MedianMetric, number>>;
}

export interface MatchedMedian {
  readonly phase: string;
  readonly config: string;
  readonly cap_kind: string;
  readonly level: string;
  readonly cap_value: number;
  readonly num_repeats: number;
  readonly repeats: readonly number[];
  /** Median over repeats; null where every repeat was NaN (JSON has no NaN). */
  readonly medians: Readonly<Record<MedianMetric, number | null>>;
}

/** Median of the finite values (NaN entries are absent measurements, not zeros); NaN if none. */
export function medianOf(values: readonly number[]): number {
  const finite = values.filter((v) => Number.isFinite(v));
  return quantileSorted(sortedCopy(finite), 0.5);
}

/** One entry per (phase, config), in first-seen order. */
export function matchedMedians(rows: readonly SummaryFacts[]): MatchedMedian[] {
  const groups = new Map<string, SummaryFacts[]>();
  for (const r of rows) {
    const k = `${r.phase}/${r.config}`;
    const g = groups.get(k);
    if (g === undefined) groups.set(k, [r]);
    else g.push(r);
  }
  return [...groups.values()].map((g) => {
    const first = g[0]!;
    const medians = Object.fromEntries(
      MEDIAN_METRICS.map((m) => {
        const v = medianOf(g.map((r) => r.metrics[m]));
        return [m, Number.isFinite(v) ? v : null];
      }),
    ) as Record<MedianMetric, number | null>;
    return {
      phase: first.phase,
      config: first.config,
      cap_kind: first.cap_kind,
      level: first.level,
      cap_value: first.cap_value,
      num_repeats: g.length,
      repeats: g.map((r) => r.repeat).sort((a, b) => a - b),
      medians,
    };
  });
}

export interface RequestCapChoice {
  /** The chosen cap (smallest within tolerance of the best steady RPS). */
  readonly selected: number;
  /** The next larger cap swept, its comparison boundary; null when the selected cap is the largest. */
  readonly comparison: number | null;
  readonly bestRps: number;
  readonly rule: string;
}

/** Applies the request-cap rule to (cap, steady RPS) pairs; throws when nothing was measured. */
export function chooseRequestCap(points: ReadonlyArray<{ cap: number; rps: number }>, toleranceShare: number): RequestCapChoice {
  const measured = points.filter((p) => Number.isFinite(p.rps)).sort((a, b) => a.cap - b.cap);
  if (measured.length === 0) throw new Error('chooseRequestCap: expected at least one measured cap, got none');
  const bestRps = Math.max(...measured.map((p) => p.rps));
  const selected = measured.find((p) => p.rps >= (1 - toleranceShare) * bestRps)!.cap;
  const larger = measured.filter((p) => p.cap > selected);
  return {
    selected,
    comparison: larger[0]?.cap ?? null,
    bestRps,
    rule: `smallest request cap whose steady RPS is at least ${(1 - toleranceShare).toFixed(2)} x the best cap's (${bestRps.toFixed(3)} RPS); the next larger cap is its comparison boundary`,
  };
}

/** Signed relative difference of a from b, e.g. '+3.0%'. */
const pct = (a: number | null, b: number | null): string => {
  if (a === null || b === null) return 'n/a';
  const d = ((a - b) / b) * 100;
  return `${d >= 0 ? '+' : ''}${d.toFixed(1)}%`;
};
/** Signed difference of two shares in percentage points. */
const pp = (a: number | null, b: number | null): string => (a === null || b === null ? 'n/a' : `${a - b >= 0 ? '+' : ''}${((a - b) * 100).toFixed(1)} pp`);
/** Signed difference a − b in ms, e.g. '+363 ms'. */
const ms = (a: number | null, b: number | null): string => {
  if (a === null || b === null) return 'n/a';
  const d = Math.round(a - b);
  return `${d >= 0 ? '+' : ''}${d} ms`;
};

/**
 * The request-count decision on matched medians. The rule is applied among the configurations
 * with the most repeats (the selected cap and its boundary): a single-run calibration point chose
 * that pair, it does not decide against three repeats. Deltas are the other repeated cap's.
 */
export function requestDecision(medians: readonly MatchedMedian[], toleranceShare: number): Record<string, unknown> {
  const sweep = medians.filter((m) => m.phase === 'request-sweep');
  const full = Math.max(...sweep.map((m) => m.num_repeats));
  const repeated = sweep.filter((m) => m.num_repeats === full);
  const choice = chooseRequestCap(repeated.map((m) => ({ cap: m.cap_value, rps: m.medians.steady_rps ?? NaN })), toleranceShare);
  const sel = repeated.find((m) => m.cap_value === choice.selected)!;
  const others = repeated.filter((m) => m !== sel);
  const cmp = others.find((m) => m.cap_value > sel.cap_value) ?? others[0] ?? null;
  const why =
    cmp === null
      ? `cap ${sel.cap_value} is the only configuration with ${full} repeat(s)`
      : `cap ${cmp.cap_value} against cap ${sel.cap_value} (matched medians over ${full} repeats): steady RPS ${pct(cmp.medians.steady_rps, sel.medians.steady_rps)}, ` +
        `p95 TTFT ${ms(cmp.medians.p95_ttft_ms, sel.medians.p95_ttft_ms)}, p99 TTFT ${ms(cmp.medians.p99_ttft_ms, sel.medians.p99_ttft_ms)}, 429 rate ${pp(cmp.medians.rate_429, sel.medians.rate_429)}`;
  return {
    selected_cap: choice.selected, comparison_cap: cmp?.cap_value ?? null, num_repeats: full, best_rps: choice.bestRps,
    rule: `among the request caps with ${full} repeat(s): ${choice.rule}`, why, selected: sel, comparison: cmp,
  };
}

/** The mixed-size decision: request cap vs input-token cap 1.0x vs input-plus-output estimate. */
export function mixedDecision(medians: readonly MatchedMedian[], toleranceShare: number): Record<string, unknown> | null {
  const mixed = medians.filter((m) => m.phase === 'mixed');
  const req = mixed.find((m) => m.cap_kind === 'request');
  const inp = mixed.find((m) => m.cap_kind === 'input' && m.level === '1.0x');
  if (req === undefined || inp === undefined) return null;
  const total = mixed.find((m) => m.cap_kind === 'total') ?? null;
  const rps = (m: MatchedMedian): number => m.medians.steady_rps ?? NaN;
  const short = (m: MatchedMedian): number => m.medians.p95_ttft_short_ms ?? NaN;
  const inputAdvances = rps(inp) >= rps(req) && short(inp) <= short(req);
  const totalAdvances = total !== null && rps(total) >= (1 - toleranceShare) * rps(req);
  return {
    selected_kind: inputAdvances ? 'input' : 'request',
    selected_config: inputAdvances ? inp.config : req.config,
    input_token_advances: inputAdvances,
    total_estimate_advances: totalAdvances,
    rule:
      'input-token cap (1.0x measured capacity) advances if its matched-median steady RPS >= the request cap\'s and its short-request p95 TTFT <= the request cap\'s; ' +
      `the input-plus-output estimate advances if its steady RPS >= ${(1 - toleranceShare).toFixed(2)} x the request cap's`,
    why:
      `input-token cap (1.0x) against request cap (matched medians): steady RPS ${pct(inp.medians.steady_rps, req.medians.steady_rps)}, short p95 TTFT ${ms(inp.medians.p95_ttft_short_ms, req.medians.p95_ttft_short_ms)}, ` +
      `medium ${ms(inp.medians.p95_ttft_medium_ms, req.medians.p95_ttft_medium_ms)}, long ${ms(inp.medians.p95_ttft_long_ms, req.medians.p95_ttft_long_ms)}` +
      (total === null ? '' : `; input-plus-output estimate (one run) against request cap: steady RPS ${pct(total.medians.steady_rps, req.medians.steady_rps)}`),
    request: req,
    input: inp,
    total,
  };
}
