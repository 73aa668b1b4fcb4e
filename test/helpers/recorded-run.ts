// A small recorded run for the dashboard's test and its screenshot script: a mock-runner server
// with the flight recorder on, driven open loop (fixed arrival times, deterministic sizes) hard
// enough that its queue cap refuses some requests. The server stays up so the dashboard can open
// the run; the caller closes it.

import { startTestServer } from './headroom.ts';
import type { TestServer, TestServerOptions } from './headroom.ts';

export interface RecordedRun {
  readonly server: TestServer;
  readonly runName: string;
  /** HTTP status per request, in arrival order. */
  readonly statuses: readonly number[];
}

export interface RecordedRunOptions {
  readonly dir: string;
  readonly numRequests: number;
  /** Mean arrivals per second (evenly spaced, with a burst in the middle third at 3x). */
  readonly ratePerS: number;
  readonly maxQueuedRequests: number;
  readonly sloMs?: number;
  /** Admission control (default off: the queue cap alone refuses). */
  readonly admission?: TestServerOptions['admission'];
}

export async function recordRun(opts: RecordedRunOptions): Promise<RecordedRun> {
  const server = await startTestServer({
    mock: { cost: { speed: 1, stepOverheadMs: 6, decodeSeqMs: 0.6, prefillTokenMs: 0.05 } },
    scheduler: { scheduler: 'continuous' },
    maxQueuedRequests: opts.maxQueuedRequests,
    server: { sloMs: opts.sloMs ?? 2000 },
    record: { dir: opts.dir, flushMs: 100 },
    ...(opts.admission === undefined ? {} : { admission: opts.admission }),
  });
  const n = opts.numRequests;
  const gapMs = 1000 / opts.ratePerS;
  const sends: Promise<number>[] = [];
  const t0 = performance.now();
  for (let i = 0; i < n; i++) {
    const burst = i >= n / 3 && i < (2 * n) / 3;
    const wait = t0 + (i < n / 3 ? i * gapMs : burst ? (n / 3) * gapMs + (i - n / 3) * (gapMs / 3) : (n / 3) * gapMs + (n / 9) * gapMs + (i - (2 * n) / 3) * gapMs) - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    sends.push(
      fetch(`${server.url}/v1/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'headroom-mock', prompt: `request ${i} `.repeat(1 + (i % 5) * 4), max_tokens: 8 + ((i * 7) % 48), ignore_eos: true }),
      }).then(async (res) => {
        await res.arrayBuffer();
        return res.status;
      }),
    );
  }
  const statuses = await Promise.all(sends);
  const recorder = server.headroom.recorder;
  if (recorder === null) throw new Error('recordRun: the server has no recorder');
  await recorder.flush();
  return { server, runName: recorder.runName, statuses };
}
