// What one point of the flow-control calibration study is, and the numbers it gives. A point is
// one gateway configuration (a cap kind and value) driven by one load (closed loop with C clients,
// or open-loop gamma arrivals) for one repeat. Repeats of a configuration share everything but
// the seed, and repeat r uses the same seed in every configuration, so repeats are matched across
// configurations (the same prompts in the same order meet each cap).
//
// Invariants: a point's summary is a pure function of its request records (src/harness/report.ts
// does the counting, steady rows only); its label is not part of the point, because which
// configurations are "selected" is decided after the calibration pass (labelOf).
import type { RequestRecord } from '../record.ts';
import { byClass, summarize } from '../report.ts';

/** The study's three stages, in run order. */
export type StudyPhase = 'request-sweep' | 'mixed' | 'open-noisy';
/** Which flow-control cap the gateway ran with. */
export type CapKind = 'request' | 'input' | 'total';
export type PointLabel = 'calibration' | 'selected';

export const CAP_FLAG: Readonly<Record<CapKind, string>> = {
  request: '--max-inflight-requests',
  input: '--max-inflight-tokens',
  total: '--max-inflight-total-tokens',
};

export const CAP_UNIT: Readonly<Record<CapKind, string>> = {
  request: 'requests in flight',
  input: 'prompt tokens in flight (gateway estimate: prompt bytes / 4)',
  total: 'prompt tokens + max_tokens in flight (gateway estimate)',
};

export interface PointPlan {
  /** Unique, path-safe: `<phase>/<config>/r<repeat>`. */
  readonly id: string;
  readonly phase: StudyPhase;
  /** Configuration key shared by a point's repeats, e.g. `request-8`, `input-1.0x`. */
  readonly config: string;
  readonly capKind: CapKind;
  /** The cap's level as the study names it: the request count, or `0.8x` of measured capacity. */
  readonly level: string;
  /** The value passed to the gateway's cap flag. */
  readonly capValue: number;
  /** 1-based repeat index. */
  readonly repeat: number;
  readonly loop: 'closed' | 'open';
  readonly workload: 'uniform' | 'mixed';
  /** Closed loop: clients; open loop: 0. */
  readonly concurrency: number;
  /** Open loop: mean arrivals per second; closed loop: 0. */
  readonly ratePerS: number;
  readonly seed: number;
  /** The gateway's flow-control flags for this point, exactly as passed. */
  readonly gatewayFlags: readonly string[];
  /** Why the cap differs from what its level asks for (a token cap floored at the largest request), or ''. */
  readonly note: string;
}

export const SUMMARY_COLUMNS = [
  'point_id', 'phase', 'config', 'cap_kind', 'level', 'cap_value', 'cap_unit', 'repeat', 'label', 'loop', 'workload',
  'concurrency', 'rate_rps', 'window_s', 'num_steady', 'completed', 'num_429', 'steady_rps', 'p50_ttft_ms', 'p95_ttft_ms',
  'p99_ttft_ms', 'rate_429', 'p95_ttft_short_ms', 'p95_ttft_medium_ms', 'p95_ttft_long_ms', 'input_tokens_per_s', 'gates_passed',
] as const;
export type SummaryColumn = (typeof SUMMARY_COLUMNS)[number];

/** The numbers of one point, as summary.csv holds them (label added when written). */
export interface PointSummary {
  readonly plan: PointPlan;
  readonly windowS: number;
  readonly numSteady: number;
  readonly completed: number;
  readonly num429: number;
  /** 'ok' steady rows per second of the steady window (report.ts's request_throughput). */
  readonly steadyRps: number;
  readonly p50TtftMs: number;
  readonly p95TtftMs: number;
  readonly p99TtftMs: number;
  /** 429s / steady arrivals. */
  readonly rate429: number;
  /** p95 TTFT by mixed-size class; NaN when the class is absent. */
  readonly p95TtftByClassMs: Readonly<Record<'short' | 'medium' | 'long', number>>;
  /** Prompt tokens of 'ok' steady rows per second (usage.prompt_tokens where the server sent it). */
  readonly inputTokensPerS: number;
}

/** Summarises a point's records; `windowS` is its steady window. */
export function summarizePoint(plan: PointPlan, records: readonly RequestRecord[], windowS: number): PointSummary {
  const opts = { sloMs: Infinity, windowS, timeoutMs: Infinity };
  const s = summarize(records, opts);
  const classes = new Map(byClass(records, opts).map((c) => [c.klass, c.ttft.p95]));
  return {
    plan,
    windowS,
    numSteady: s.num_arrivals,
    completed: s.completed,
    num429: s.num_429,
    steadyRps: s.request_throughput,
    p50TtftMs: s.median_ttft_ms,
    p95TtftMs: s.p95_ttft_ms,
    p99TtftMs: s.p99_ttft_ms,
    rate429: s.rate_429,
    p95TtftByClassMs: { short: classes.get('short') ?? NaN, medium: classes.get('medium') ?? NaN, long: classes.get('long') ?? NaN },
    inputTokensPerS: s.total_input_tokens / windowS,
  };
}

export function summaryRow(s: PointSummary, label: PointLabel, gatesPassed: boolean): Record<SummaryColumn, string | number | boolean | null> {
  const p = s.plan;
  return {
    point_id: p.id,
    phase: p.phase,
    config: p.config,
    cap_kind: p.capKind,
    level: p.level,
    cap_value: p.capValue,
    cap_unit: CAP_UNIT[p.capKind],
    repeat: p.repeat,
    label,
    loop: p.loop,
    workload: p.workload,
    concurrency: p.concurrency,
    rate_rps: p.ratePerS,
    window_s: s.windowS,
    num_steady: s.numSteady,
    completed: s.completed,
    num_429: s.num429,
    steady_rps: s.steadyRps,
    p50_ttft_ms: s.p50TtftMs,
    p95_ttft_ms: s.p95TtftMs,
    p99_ttft_ms: s.p99TtftMs,
    rate_429: s.rate429,
    p95_ttft_short_ms: s.p95TtftByClassMs.short,
    p95_ttft_medium_ms: s.p95TtftByClassMs.medium,
    p95_ttft_long_ms: s.p95TtftByClassMs.long,
    input_tokens_per_s: s.inputTokensPerS,
    gates_passed: gatesPassed,
  };
}

/** A configuration is "selected" when the study chose it (or its comparison boundary) for repeats. */
export function labelOf(plan: PointPlan, selectedConfigs: ReadonlySet<string>): PointLabel {
  return selectedConfigs.has(configKey(plan.phase, plan.config)) ? 'selected' : 'calibration';
}

export function configKey(phase: StudyPhase, config: string): string {
  return `${phase}/${config}`;
}
