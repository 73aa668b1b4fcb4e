// The live half of /dashboard: the last WINDOW_S seconds of the engine in one-second buckets
// (admitted, refused, finished, mean batch, and queue, outstanding and KV use sampled once a
// second), plus the latest finishes and admission decisions as points. A run listener: each event
// is O(1) on the step loop's thread, and memory is bounded by the window and the point rings.

import type { RefusalReason } from '../backend/refusal.ts';
import type { Engine } from '../engine/engine.ts';
import type { FinishReason, RequestTimeline } from '../engine/outputs.ts';
import type { StepRecord } from '../engine/step-record.ts';
import type { DashboardData, DecisionPoint, RequestPoint } from './dashboard-data.ts';
import type { DecisionEvent, RunListener } from './run-listener.ts';

/** Seconds of history kept. */
export const WINDOW_S = 300;
/** Latest finishes and decisions kept for the scatter plots. */
export const MAX_LIVE_POINTS = 2000;

interface Bucket {
  /** Engine clock second (floor(ms / 1000)). */
  readonly second: number;
  admitted: number;
  refused: number;
  finished: number;
  rows: number;
  steps: number;
  waiting: number | null;
  running: number | null;
  outstanding: number | null;
  kv: number | null;
}

interface LivePoint {
  readonly arrivalMs: number;
  readonly ttftMs: number | null;
  readonly e2eMs: number | null;
  readonly outcome: string;
  readonly id: string;
}

export class LiveView implements RunListener {
  readonly #engine: Engine;
  readonly #sloMs: number;
  readonly #buckets: Bucket[] = [];
  readonly #points: LivePoint[] = [];
  readonly #decisions: { atMs: number; boundMs: number | null; budgetMs: number; admit: boolean }[] = [];
  #numAdmitted = 0;
  #numRefused = 0;
  #lastBatch = 0;
  readonly #timer: NodeJS.Timeout;

  constructor(engine: Engine, opts: { readonly sloMs: number }) {
    this.#engine = engine;
    this.#sloMs = opts.sloMs;
    this.#timer = setInterval(() => this.#sample(), 1000);
    this.#timer.unref();
  }

  readonly step = (r: StepRecord): void => {
    const b = this.#bucket(r.endMs);
    b.admitted += r.arrivals.length;
    this.#numAdmitted += r.arrivals.length;
    b.rows += r.plan.items.length;
    b.steps++;
    this.#lastBatch = r.plan.items.length;
  };

  readonly refused = (_t: RequestTimeline, _reason: RefusalReason, atMs: number): void => {
    this.#bucket(atMs).refused++;
    this.#numRefused++;
  };

  readonly finished = (t: RequestTimeline, reason: FinishReason): void => {
    const at = t.finishedMs ?? this.#engine.now();
    this.#bucket(at).finished++;
    push(this.#points, { id: t.requestId, arrivalMs: t.arrivalMs, ttftMs: t.firstTokenMs === null ? null : t.firstTokenMs - t.arrivalMs, e2eMs: t.finishedMs === null ? null : t.finishedMs - t.arrivalMs, outcome: reason });
  };

  readonly decided = (d: DecisionEvent): void => {
    push(this.#decisions, { atMs: d.atMs, boundMs: d.boundMs, budgetMs: d.budgetMs, admit: d.admit });
  };

  stop(): void {
    clearInterval(this.#timer);
  }

  /** The window as the page draws it (the current second's gauges sampled now). */
  data(): DashboardData {
    this.#sample();
    const nowMs = this.#engine.now();
    const first = Math.floor(nowMs / 1000) - WINDOW_S + 1;
    const t0Ms = first * 1000;
    const byS = new Map(this.#buckets.map((b) => [b.second, b]));
    const seconds = Array.from({ length: WINDOW_S }, (_, k) => first + k);
    const get = <T>(f: (b: Bucket) => T, none: T): T[] => seconds.map((s) => {
      const b = byS.get(s);
      return b === undefined ? none : f(b);
    });
    const s = this.#engine.scheduler.snapshot();
    const round = (x: number): number => Math.round(x * 1000) / 1000;
    const requests: RequestPoint[] = this.#points.slice(-MAX_LIVE_POINTS).filter((p) => p.arrivalMs >= t0Ms).map((p) => ({ id: p.id, tS: round((p.arrivalMs - t0Ms) / 1000), ttftMs: p.ttftMs === null ? null : round(p.ttftMs), e2eMs: p.e2eMs === null ? null : round(p.e2eMs), outcome: p.outcome }));
    const decisions: DecisionPoint[] = this.#decisions.slice(-MAX_LIVE_POINTS).filter((d) => d.atMs >= t0Ms).map((d) => ({ tS: round((d.atMs - t0Ms) / 1000), boundMs: d.boundMs === null ? null : round(d.boundMs), budgetMs: d.budgetMs, admit: d.admit }));
    const info = this.#engine.runner.info;
    return {
      mode: 'live',
      title: 'live',
      sloMs: this.#sloMs,
      facts: { model: info.modelId, runner: info.name, scheduler: s.name, window: `last ${WINDOW_S} s` },
      series: {
        bucketS: 1,
        tS: seconds.map((_, k) => k),
        admitted: get((b) => b.admitted, 0),
        refused: get((b) => b.refused, 0),
        finished: get((b) => b.finished, 0),
        outstanding: get((b) => b.outstanding ?? 0, 0),
        waiting: get((b) => b.waiting ?? 0, 0),
        running: get((b) => b.running ?? 0, 0),
        batch: get((b) => (b.steps === 0 ? null : Math.round((b.rows / b.steps) * 100) / 100), null),
        kv: get((b) => b.kv, null),
      },
      requests,
      numRequests: this.#numAdmitted + this.#numRefused,
      numRefused: this.#numRefused,
      decisions,
      now: { waiting: s.numWaiting, running: s.numRunning, batch: this.#lastBatch, kvUsage: round(s.kv.usage), outstanding: this.#engine.numUnfinished, steps: this.#engine.stats().numSteps, stopReason: s.stopReason },
    };
  }

  #sample(): void {
    const s = this.#engine.scheduler.snapshot();
    const b = this.#bucket(this.#engine.now());
    b.waiting = s.numWaiting;
    b.running = s.numRunning;
    b.outstanding = this.#engine.numUnfinished;
    b.kv = Math.round(s.kv.usage * 1000) / 1000;
  }

  #bucket(ms: number): Bucket {
    const second = Math.floor(ms / 1000);
    const last = this.#buckets[this.#buckets.length - 1];
    if (last !== undefined && last.second === second) return last;
    // An event stamped a little in the past (a refusal decided before the step that ended now) goes to its own second if kept.
    if (last !== undefined && second < last.second) return this.#buckets.find((b) => b.second === second) ?? last;
    const b: Bucket = { second, admitted: 0, refused: 0, finished: 0, rows: 0, steps: 0, waiting: null, running: null, outstanding: null, kv: null };
    this.#buckets.push(b);
    while (this.#buckets.length > 0 && this.#buckets[0]!.second <= second - WINDOW_S) this.#buckets.shift();
    return b;
  }
}

/** Append, and trim to the newest MAX_LIVE_POINTS once twice that many are held (amortised O(1)). */
function push<T>(ring: T[], x: T): void {
  ring.push(x);
  if (ring.length >= 2 * MAX_LIVE_POINTS) ring.splice(0, ring.length - MAX_LIVE_POINTS);
}
