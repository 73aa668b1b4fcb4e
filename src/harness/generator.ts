// The load generator: open loop (scheduled arrivals) and closed loop (N workers).
//
// Open loop invariants:
//   - the schedule is fixed before t0; an outstanding request never delays the next arrival;
//   - the connection pool is unbounded (a pool limit is backpressure, which would quietly turn
//     the generator back into a closed loop);
//   - every arrival due by "now" is dispatched in the same tick, each stamped with its own send
//     time, so a late tick shows up as slip on the rows it delayed rather than as a shifted schedule.
// Timing: setTimeout (≈1 ms granularity, often later) covers waits longer than SPIN_MS; the last
// SPIN_MS are covered by setImmediate polling, which keeps serving socket I/O between checks.
//
// Closed loop exists for capacity calibration only: offered load there is a consequence of the
// server's speed, and every row says loop = 'closed'.
import { performance } from 'node:perf_hooks';
import { Agent } from 'undici';
import type { RequestSpec } from './workloads.ts';
import type { RequestRecord } from './record.ts';
import { phaseOf } from './record.ts';
import type { ClientOptions } from './client.ts';
import { sendRequest } from './client.ts';

const SPIN_MS = 2;

export interface Progress {
  /** Requests handed to the HTTP client. */
  numSent: number;
  /** Requests finished (any outcome). */
  numDone: number;
  /** Arrivals planned (open loop) or 0 (closed loop). */
  numPlanned: number;
}

export interface OpenLoopOptions {
  readonly client: ClientOptions;
  /** Intended arrival offsets, ms from t0, ascending. */
  readonly arrivalsMs: Float64Array;
  /** One spec per arrival. */
  readonly specs: readonly RequestSpec[];
  readonly durationMs: number;
  readonly warmupMs: number;
  readonly cooldownMs: number;
  readonly progress?: Progress;
  /** Called with each record as its request ends (a live view of the run; the demo draws from it). */
  readonly onRecord?: (rec: RequestRecord) => void;
  /** Aborting stops the schedule (no further arrivals are sent) and ends every request in flight. */
  readonly signal?: AbortSignal;
}

/** Creates the dispatcher every run uses: unlimited connections, no undici-side timeouts. */
export function createDispatcher(): Agent {
  return new Agent({ connections: null, pipelining: 1, headersTimeout: 0, bodyTimeout: 0, keepAliveTimeout: 60_000 });
}

/** Runs the schedule and resolves with one record per arrival, in schedule order. */
export async function runOpenLoop(opts: OpenLoopOptions): Promise<RequestRecord[]> {
  const { arrivalsMs, specs } = opts;
  const n = arrivalsMs.length;
  if (specs.length !== n) throw new Error(`runOpenLoop: expected ${n} specs, got ${specs.length}`);
  const dispatcher = createDispatcher();
  const pending: Array<Promise<RequestRecord>> = new Array<Promise<RequestRecord>>(n);
  const progress = opts.progress ?? { numSent: 0, numDone: 0, numPlanned: n };
  progress.numPlanned = n;
  const t0 = performance.now();

  const dispatch = (i: number): void => {
    const intendedMs = arrivalsMs[i] ?? 0;
    const spec = specs[i];
    if (spec === undefined) throw new Error(`runOpenLoop: bug: no spec for arrival ${i}`);
    const p = sendRequest(dispatcher, spec, opts.client, {
      requestId: i,
      loop: 'open',
      worker: null,
      phase: phaseOf(intendedMs, opts.durationMs, opts.warmupMs, opts.cooldownMs),
      intendedMs,
      t0,
      ...(opts.signal === undefined ? {} : { signal: opts.signal }),
    });
    progress.numSent++;
    void p.then((rec) => {
      progress.numDone++;
      opts.onRecord?.(rec);
    });
    pending[i] = p;
  };

  await new Promise<void>((resolve) => {
    let next = 0;
    const tick = (): void => {
      if (opts.signal?.aborted === true) {
        resolve();
        return;
      }
      const nowMs = performance.now() - t0;
      while (next < n && (arrivalsMs[next] ?? 0) <= nowMs) dispatch(next++);
      if (next >= n) {
        resolve();
        return;
      }
      const waitMs = (arrivalsMs[next] ?? 0) - (performance.now() - t0);
      if (waitMs > SPIN_MS) setTimeout(tick, waitMs - SPIN_MS);
      else setImmediate(tick);
    };
    tick();
  });
  try {
    // An aborted run sent only a prefix of the schedule.
    return await Promise.all(opts.signal?.aborted === true ? pending.filter((x) => x !== undefined) : pending);
  } finally {
    await dispatcher.close();
  }
}

export interface ClosedLoopOptions {
  readonly client: ClientOptions;
  /** Number of workers; each sends its next request when the previous one ends. */
  readonly concurrency: number;
  readonly durationMs: number;
  readonly warmupMs: number;
  readonly cooldownMs: number;
  /** Draws the next request's spec; called in issue order. */
  readonly nextSpec: () => RequestSpec;
  readonly progress?: Progress;
  /** Aborting stops the workers and ends every request in flight (its row is a transport error). */
  readonly signal?: AbortSignal;
}

/** Closed loop: N workers issue back-to-back until durationMs; rows in issue order. */
export async function runClosedLoop(opts: ClosedLoopOptions): Promise<RequestRecord[]> {
  if (!(Number.isInteger(opts.concurrency) && opts.concurrency > 0)) {
    throw new Error(`runClosedLoop: expected a positive integer concurrency, got ${opts.concurrency}`);
  }
  const dispatcher = createDispatcher();
  const records: RequestRecord[] = [];
  const progress = opts.progress ?? { numSent: 0, numDone: 0, numPlanned: 0 };
  const t0 = performance.now();
  let nextId = 0;
  const worker = async (w: number): Promise<void> => {
    for (;;) {
      const intendedMs = performance.now() - t0;
      if (intendedMs >= opts.durationMs || opts.signal?.aborted === true) return;
      const requestId = nextId++;
      progress.numSent++;
      const rec = await sendRequest(dispatcher, opts.nextSpec(), opts.client, {
        requestId,
        loop: 'closed',
        worker: w,
        phase: phaseOf(intendedMs, opts.durationMs, opts.warmupMs, opts.cooldownMs),
        intendedMs,
        t0,
        ...(opts.signal === undefined ? {} : { signal: opts.signal }),
      });
      progress.numDone++;
      records.push(rec);
    }
  };
  try {
    await Promise.all(Array.from({ length: opts.concurrency }, (_, w) => worker(w)));
  } finally {
    await dispatcher.close();
  }
  return records.sort((a, b) => a.request_id - b.request_id);
}
