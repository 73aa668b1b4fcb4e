// What the /dashboard page draws, as one JSON shape for both of its modes: the live engine
// (live-view.ts) and a run — a flight recording (runData below) or a benchmark result
// (dashboard-results.ts), both through timelineData. Per-second series
// for the counters and gauges, one point per request for the latency scatter, one per decision for
// the admission bound against the budget. Times are seconds from the start of the window or run.
//
// Point lists are capped (MAX_POINTS, an even stride over the run) so a long run stays a page a
// browser draws in well under a second; `numRequests` says how many there were in all.

import type { Recording } from './recorder/reader.ts';

export interface DashboardSeries {
  /** Width of a bucket, s (live: 1; a recorded run: chosen so that it has at most MAX_BUCKETS). */
  readonly bucketS: number;
  /** Start of each bucket, s. */
  readonly tS: readonly number[];
  /** Requests submitted to the engine (admitted) per second, over the bucket; refused and finished likewise. */
  readonly admitted: readonly number[];
  readonly refused: readonly number[];
  readonly finished: readonly number[];
  /** Requests admitted and not finished (at the end of the bucket). */
  readonly outstanding: readonly number[];
  /** Waiting and running requests (live: sampled; recorded: from each request's timeline). */
  readonly waiting: readonly number[];
  readonly running: readonly number[];
  /** Mean rows per engine step in the bucket (null: no step). */
  readonly batch: readonly (number | null)[];
  /** Share of KV blocks in use, 0..1 (null: unknown, as in recordings). */
  readonly kv: readonly (number | null)[];
}

export interface RequestPoint {
  readonly id: string;
  /** Arrival, s. */
  readonly tS: number;
  readonly ttftMs: number | null;
  readonly e2eMs: number | null;
  readonly outcome: string;
}

export interface DecisionPoint {
  readonly tS: number;
  readonly boundMs: number | null;
  readonly budgetMs: number;
  readonly admit: boolean;
}

export interface DashboardData {
  readonly mode: 'live' | 'run';
  readonly title: string;
  readonly sloMs: number | null;
  /** Facts shown under the title (model, runner, scheduler, version, start time). */
  readonly facts: Readonly<Record<string, string>>;
  readonly series: DashboardSeries;
  readonly requests: readonly RequestPoint[];
  /** Requests in all (admitted and refused; the scatter may show fewer). */
  readonly numRequests: number;
  readonly numRefused: number;
  readonly decisions: readonly DecisionPoint[];
  /** Live: current gauges. */
  readonly now?: Readonly<Record<string, number | string | null>>;
}

export const MAX_POINTS = 5000;
/** Most time buckets in a recorded run's series. */
export const MAX_BUCKETS = 300;
const BUCKET_WIDTHS_MS = [100, 200, 500, 1000, 2000, 5000, 10_000, 15_000, 30_000, 60_000, 120_000, 300_000, 600_000, 1_800_000, 3_600_000];

/** The narrowest round bucket width that covers `spanMs` in at most MAX_BUCKETS buckets. */
export function bucketWidthMs(spanMs: number): number {
  for (const w of BUCKET_WIDTHS_MS) if (spanMs / w <= MAX_BUCKETS) return w;
  return Math.ceil(spanMs / MAX_BUCKETS / 3_600_000) * 3_600_000;
}

function perSecond(counts: readonly number[], bucketMs: number): number[] {
  return counts.map((c) => Math.round((c * 1000 * 1000) / bucketMs) / 1000);
}

/** Every k-th element so that at most `max` remain (first and order kept). */
export function capPoints<T>(xs: readonly T[], max = MAX_POINTS): T[] {
  if (xs.length <= max) return [...xs];
  const stride = xs.length / max;
  const out: T[] = [];
  for (let i = 0; i < max; i++) out.push(xs[Math.floor(i * stride)]!);
  return out;
}

const str = (v: unknown): string => (typeof v === 'string' ? v : '?');
const round = (x: number, d = 3): number => Math.round(x * 10 ** d) / 10 ** d;

/** One admitted request on a run's timeline (engine clock or the harness's, ms). */
export interface TimelineRequest {
  readonly id: string;
  readonly arrivalMs: number;
  /** When it stopped waiting: its first step (recorder) or first token (benchmark); null: never. */
  readonly startMs: number | null;
  readonly finishMs: number | null;
  readonly ttftMs: number | null;
  readonly e2eMs: number | null;
  readonly outcome: string;
}

/** A run from any source, before bucketing. */
export interface TimelineInput {
  readonly title: string;
  readonly facts: Readonly<Record<string, string>>;
  readonly sloMs: number | null;
  readonly admitted: readonly TimelineRequest[];
  /** When each refusal happened. */
  readonly refusedAtMs: readonly number[];
  /** Engine steps: start time and rows (none for a benchmark result: batch is then unknown). */
  readonly steps: readonly { readonly startMs: number; readonly endMs: number; readonly numRows: number }[];
  readonly decisions: readonly { readonly atMs: number; readonly boundMs: number | null; readonly budgetMs: number; readonly admit: boolean }[];
  /** The run's last moment if known beyond its events (the recorder's end record). */
  readonly endMs?: number;
  /** Time zero when there are no events. */
  readonly originMs: number;
}

/** A run as the page draws it: per-bucket series, O(requests + steps + buckets). */
export function timelineData(run: TimelineInput): DashboardData {
  // Loops, not Math.min(...xs): a long run has more values than a call may take arguments.
  let t0 = Infinity;
  let tEnd = -Infinity;
  const see = (from: number, to: number): void => {
    if (from < t0) t0 = from;
    if (to > tEnd) tEnd = to;
  };
  for (const d of run.admitted) see(d.arrivalMs, d.finishMs ?? d.arrivalMs);
  for (const at of run.refusedAtMs) see(at, at);
  for (const s of run.steps) see(s.startMs, s.endMs);
  if (t0 === Infinity) t0 = tEnd = run.originMs;
  if (run.endMs !== undefined && run.endMs > tEnd) tEnd = run.endMs;
  const bucketMs = bucketWidthMs(tEnd - t0);
  const numBuckets = Math.max(1, Math.ceil((tEnd - t0) / bucketMs) + 1);
  const zeros = (): number[] => new Array<number>(numBuckets).fill(0);
  const bucket = (ms: number): number => Math.min(numBuckets - 1, Math.max(0, Math.floor((ms - t0) / bucketMs)));
  const admitted = zeros();
  const refused = zeros();
  const finished = zeros();
  const outstanding = zeros();
  const waiting = zeros();
  const running = zeros();
  const rows = zeros();
  const steps = zeros();
  // Interval counts by difference arrays: a request is counted at the end of each bucket it
  // spends between arrival and finish (waiting before it starts, then running).
  const add = (diff: number[], fromMs: number, toMs: number): void => {
    const k0 = Math.max(0, Math.ceil((fromMs - t0) / bucketMs - 1));
    const k1 = Math.min(numBuckets, Math.ceil((toMs - t0) / bucketMs - 1));
    if (k1 <= k0) return;
    diff[k0]!++;
    if (k1 < numBuckets) diff[k1]!--;
  };
  for (const d of run.admitted) {
    admitted[bucket(d.arrivalMs)]!++;
    if (d.finishMs !== null) finished[bucket(d.finishMs)]!++;
    const end = d.finishMs ?? tEnd + bucketMs;
    const start = Math.min(d.startMs ?? end, end);
    add(outstanding, d.arrivalMs, end);
    add(waiting, d.arrivalMs, start);
    add(running, start, end);
  }
  for (const diff of [outstanding, waiting, running]) for (let k = 1; k < numBuckets; k++) diff[k]! += diff[k - 1]!;
  for (const at of run.refusedAtMs) refused[bucket(at)]!++;
  for (const s of run.steps) {
    const k = bucket(s.startMs);
    rows[k]! += s.numRows;
    steps[k]!++;
  }
  const requests = run.admitted.map((d): RequestPoint => ({
    id: d.id,
    tS: round((d.arrivalMs - t0) / 1000),
    ttftMs: d.ttftMs === null ? null : round(d.ttftMs, 1),
    e2eMs: d.e2eMs === null ? null : round(d.e2eMs, 1),
    outcome: d.outcome,
  }));
  return {
    mode: 'run',
    title: run.title,
    sloMs: run.sloMs,
    facts: run.facts,
    series: {
      bucketS: bucketMs / 1000,
      tS: admitted.map((_, k) => round((k * bucketMs) / 1000)),
      admitted: perSecond(admitted, bucketMs),
      refused: perSecond(refused, bucketMs),
      finished: perSecond(finished, bucketMs),
      outstanding,
      waiting,
      running,
      batch: rows.map((r, k) => (steps[k] === 0 ? null : round(r / steps[k]!, 2))),
      kv: rows.map(() => null),
    },
    requests: capPoints(requests),
    numRequests: run.admitted.length + run.refusedAtMs.length,
    numRefused: run.refusedAtMs.length,
    decisions: capPoints(run.decisions.map((d) => ({ tS: round((d.atMs - t0) / 1000), boundMs: d.boundMs, budgetMs: d.budgetMs, admit: d.admit }))),
  };
}

/** A flight recording as the page draws it. */
export function runData(rec: Recording): DashboardData {
  const h = rec.header;
  const meta = h.meta;
  const scheduler = meta['scheduler'] as { scheduler?: string } | undefined;
  return timelineData({
    title: h.run,
    sloMs: typeof meta['sloMs'] === 'number' ? meta['sloMs'] : null,
    facts: {
      source: 'flight recording',
      started: h.startedAt,
      model: str(meta['model']),
      runner: str(meta['runner']),
      scheduler: str(scheduler?.scheduler),
      admission: str(meta['admission']),
      version: h.version,
      segments: String(rec.segments.length),
      steps: String(rec.steps.length),
    },
    admitted: rec.done.map((d) => ({ id: d.id, arrivalMs: d.arr, startMs: d.sch, finishMs: d.fin, ttftMs: d.ft === null ? null : d.ft - d.arr, e2eMs: d.fin === null ? null : d.fin - d.arr, outcome: d.o })),
    refusedAtMs: rec.refused.map((r) => r.at),
    steps: rec.steps.map((s) => ({ startMs: s.s, endMs: s.e, numRows: s.r.length })),
    decisions: rec.decisions.map((d) => ({ atMs: d.at, boundMs: d.bound, budgetMs: d.budget, admit: d.admit === 1 })),
    ...(rec.end === null ? {} : { endMs: rec.end.at }),
    originMs: h.clockAtStartMs,
  });
}
