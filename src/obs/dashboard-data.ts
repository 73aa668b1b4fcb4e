// What the /dashboard page draws, as one JSON shape for both of its modes: the live engine
// (live-view.ts) and a recorded run (from a flight recording, run-data below). Per-second series
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

/** A recorded run as the page draws it. */
export function runData(rec: Recording): DashboardData {
  const h = rec.header;
  const done = rec.done;
  // Loops, not Math.min(...xs): a long run has more values than a call may take arguments.
  let t0 = Infinity;
  let tEnd = -Infinity;
  const see = (from: number, to: number): void => {
    if (from < t0) t0 = from;
    if (to > tEnd) tEnd = to;
  };
  for (const d of done) see(d.arr, d.fin ?? d.arr);
  for (const r of rec.refused) see(r.at, r.at);
  for (const s of rec.steps) see(s.s, s.e);
  if (t0 === Infinity) t0 = tEnd = h.clockAtStartMs;
  if (rec.end !== null && rec.end.at > tEnd) tEnd = rec.end.at;
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
  // Interval counts by difference arrays, O(requests + buckets): a request is counted at the end
  // of each bucket it spends between arrival and finish (waiting before its first step, then running).
  const add = (diff: number[], fromMs: number, toMs: number): void => {
    const k0 = Math.max(0, Math.ceil((fromMs - t0) / bucketMs - 1));
    const k1 = Math.min(numBuckets, Math.ceil((toMs - t0) / bucketMs - 1));
    if (k1 <= k0) return;
    diff[k0]!++;
    if (k1 < numBuckets) diff[k1]!--;
  };
  for (const d of done) {
    admitted[bucket(d.arr)]!++;
    if (d.fin !== null) finished[bucket(d.fin)]!++;
    const end = d.fin ?? tEnd + bucketMs;
    const sch = Math.min(d.sch ?? end, end);
    add(outstanding, d.arr, end);
    add(waiting, d.arr, sch);
    add(running, sch, end);
  }
  for (const diff of [outstanding, waiting, running]) for (let k = 1; k < numBuckets; k++) diff[k]! += diff[k - 1]!;
  for (const r of rec.refused) refused[bucket(r.at)]!++;
  for (const s of rec.steps) {
    const k = bucket(s.s);
    rows[k]! += s.r.length;
    steps[k]!++;
  }
  const meta = h.meta;
  const scheduler = meta['scheduler'] as { scheduler?: string } | undefined;
  const sloMs = typeof meta['sloMs'] === 'number' ? meta['sloMs'] : null;
  const requests = done.map((d): RequestPoint => ({
    id: d.id,
    tS: round((d.arr - t0) / 1000),
    ttftMs: d.ft === null ? null : round(d.ft - d.arr, 1),
    e2eMs: d.fin === null ? null : round(d.fin - d.arr, 1),
    outcome: d.o,
  }));
  return {
    mode: 'run',
    title: h.run,
    sloMs,
    facts: {
      started: h.startedAt,
      model: str(meta['model']),
      runner: str(meta['runner']),
      scheduler: str(scheduler?.scheduler),
      admission: str(meta['admission']),
      version: h.version,
      segments: String(rec.segments.length),
      steps: String(rec.steps.length),
    },
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
    numRequests: done.length + rec.refused.length,
    numRefused: rec.refused.length,
    decisions: capPoints(rec.decisions.map((d) => ({ tS: round((d.at - t0) / 1000), boundMs: d.bound, budgetMs: d.budget, admit: d.admit === 1 }))),
  };
}
