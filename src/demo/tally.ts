// What one side of the demo looks like from the client: the load generator's records, counted as
// they end. Seconds are from the load's start (t0 of the open loop), so both sides share one axis
// and one schedule; latency is from intended arrival, as in every Headroom benchmark.
//
// Goodput is requests that completed inside the SLO per second of load; a request the client gave
// up on (--timeout-s) counts as admitted and late, with its latency above the timeout (the p99 is
// then "> timeout", never a made-up number). Memory: one bucket per second of the run, and one
// latency per admitted request (a five-minute run at single-digit rates is a few thousand numbers).
import type { RequestRecord } from '../harness/record.ts';

/** Per-second counts, index = second from the load's start. */
export interface TallySeries {
  /** Arrivals due in that second (the shared schedule). */
  readonly arrivals: number[];
  /** Completions inside the SLO, by the second they ended. */
  readonly good: number[];
  /** Completions past the SLO, and requests the client gave up on, by the second they ended. */
  readonly late: number[];
  /** 503/429 refusals, by the second they were answered. */
  readonly refused: number[];
  /** Sent and not yet answered, at the end of each second. */
  readonly outstanding: number[];
}

/** A latency in ms, 'timeout' when it is only known to exceed the client's timeout, null when there is none. */
export type Latency = number | 'timeout' | null;

export interface TallyData {
  /** Requests the generator sent to this side so far. */
  readonly numSent: number;
  /** Requests answered (any outcome). */
  readonly numDone: number;
  readonly numGood: number;
  /** Completed past the SLO. */
  readonly numLate: number;
  /** The client gave up at the timeout. */
  readonly numTimedOut: number;
  /** 503/429 answers, and how many of them carried a Retry-After header. */
  readonly numRefused: number;
  readonly numRetryAfter: number;
  /** Median Retry-After of the refusals, s (null: none). */
  readonly retryAfterMedianS: number | null;
  /** Other errors (HTTP errors, broken streams; requests cut by stopping the demo). */
  readonly numErrors: number;
  /** Completions inside the SLO per second of load so far (after the schedule ends: per second of the schedule, as `bench report` counts). */
  readonly goodputRps: number;
  /** Admitted requests answered (completed or given up on), and the share of them inside the SLO (null: none yet). */
  readonly numAdmittedDone: number;
  readonly admittedInSlo: number | null;
  /** E2E of admitted requests, ms, nearest rank; 'timeout': a given-up request (above the timeout). */
  readonly p50E2eMs: Latency;
  readonly p99E2eMs: Latency;
  readonly series: TallySeries;
}

export class SideTally {
  readonly #sloMs: number;
  readonly #durationS: number;
  readonly #arrivalsMs: Float64Array;
  readonly #e2eMs: number[] = [];
  readonly #retryAfterS: number[] = [];
  readonly #good: number[] = [];
  readonly #late: number[] = [];
  readonly #refused: number[] = [];
  readonly #done: number[] = [];
  #numSent = 0;
  #numGood = 0;
  #numLate = 0;
  #numTimedOut = 0;
  #numRefused = 0;
  #numErrors = 0;

  /** `arrivalsMs`: the schedule both sides run (intended offsets from t0, ascending) over `durationS`. */
  constructor(opts: { readonly sloMs: number; readonly durationS: number; readonly arrivalsMs: Float64Array }) {
    if (!(opts.sloMs > 0)) throw new Error(`SideTally: expected sloMs > 0, got ${opts.sloMs}`);
    if (!(opts.durationS > 0)) throw new Error(`SideTally: expected durationS > 0, got ${opts.durationS}`);
    this.#sloMs = opts.sloMs;
    this.#durationS = opts.durationS;
    this.#arrivalsMs = opts.arrivalsMs;
  }

  /** The generator's progress counter for this side (requests handed to the HTTP client). */
  setSent(numSent: number): void {
    this.#numSent = numSent;
  }

  readonly add = (rec: RequestRecord): void => {
    const second = Math.max(0, Math.floor(rec.end_ms / 1000));
    inc(this.#done, second);
    switch (rec.outcome) {
      case 'ok': {
        const e2e = rec.e2e_ms ?? Infinity;
        this.#e2eMs.push(e2e);
        if (e2e <= this.#sloMs) {
          this.#numGood++;
          inc(this.#good, second);
        } else {
          this.#numLate++;
          inc(this.#late, second);
        }
        return;
      }
      case 'timeout':
        this.#e2eMs.push(Infinity);
        this.#numTimedOut++;
        inc(this.#late, second);
        return;
      case 'shed':
        this.#numRefused++;
        if (rec.retry_after_s !== null) this.#retryAfterS.push(rec.retry_after_s);
        inc(this.#refused, second);
        return;
      case 'http_error':
      case 'transport_error':
        this.#numErrors++;
        return;
    }
  };

  /** The counts so far; `elapsedS` (seconds since the load's start) sets the series' length and the goodput's denominator. */
  data(elapsedS: number): TallyData {
    const n = Math.max(1, Math.ceil(elapsedS));
    const arrivals = new Array<number>(n).fill(0);
    for (const t of this.#arrivalsMs) {
      const s = Math.floor(t / 1000);
      if (t > elapsedS * 1000) break;
      if (s < n) arrivals[s] = (arrivals[s] ?? 0) + 1;
    }
    const outstanding: number[] = [];
    let sent = 0;
    let done = 0;
    for (let s = 0; s < n; s++) {
      sent += arrivals[s] ?? 0;
      done += this.#done[s] ?? 0;
      outstanding.push(Math.max(0, sent - done));
    }
    const sorted = [...this.#e2eMs].sort((a, b) => a - b);
    const retry = [...this.#retryAfterS].sort((a, b) => a - b);
    const retryMedian = nearestRank(retry, 0.5);
    const numAdmittedDone = this.#numGood + this.#numLate + this.#numTimedOut;
    const series = (xs: readonly number[]): number[] => Array.from({ length: n }, (_, i) => xs[i] ?? 0);
    return {
      numSent: this.#numSent,
      numDone: this.#numGood + this.#numLate + this.#numTimedOut + this.#numRefused + this.#numErrors,
      numGood: this.#numGood,
      numLate: this.#numLate,
      numTimedOut: this.#numTimedOut,
      numRefused: this.#numRefused,
      numRetryAfter: this.#retryAfterS.length,
      retryAfterMedianS: typeof retryMedian === 'number' ? retryMedian : null,
      numErrors: this.#numErrors,
      goodputRps: Math.round((this.#numGood / Math.max(1, Math.min(elapsedS, this.#durationS))) * 1000) / 1000,
      numAdmittedDone,
      admittedInSlo: numAdmittedDone === 0 ? null : Math.round((this.#numGood / numAdmittedDone) * 1000) / 1000,
      p50E2eMs: nearestRank(sorted, 0.5),
      p99E2eMs: nearestRank(sorted, 0.99),
      series: { arrivals, good: series(this.#good), late: series(this.#late), refused: series(this.#refused), outstanding },
    };
  }
}

function inc(xs: number[], i: number): void {
  while (xs.length <= i) xs.push(0);
  xs[i] = (xs[i] ?? 0) + 1;
}

/** Nearest-rank quantile of an ascending list (null when empty; 'timeout' for Infinity, a request given up on). */
export function nearestRank(sorted: readonly number[], q: number): Latency {
  const v = sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];
  if (v === undefined) return null;
  return v === Infinity ? 'timeout' : Math.round(v * 10) / 10;
}
