// The drain both front doors share (engine mode's Headroom, gateway mode's Gateway): new work is
// refused (the caller's `stop` does that and resolves once nothing is in flight), in-flight requests
// get until the deadline; past it, every one still running is cut — streams end with an SSE error
// event and [DONE] — and their last bytes get CUT_FLUSH_MS to leave. The caller closes afterwards.

import type { FastifyBaseLogger } from 'fastify';
import type { ActiveRequests } from './active-requests.ts';

export type DrainOutcome = 'drained' | 'deadline';

/** After the deadline cuts the remaining requests, how long their last bytes get to leave. */
const CUT_FLUSH_MS = 1000;

export interface DrainSteps {
  readonly log: FastifyBaseLogger;
  readonly active: ActiveRequests;
  /** Stop taking work; resolves once nothing is in flight. */
  readonly stop: () => Promise<void>;
  /** Resolves once nothing is in flight (after the cut). */
  readonly whenIdle: () => Promise<void>;
}

export async function drainUntil(deadlineMs: number, s: DrainSteps): Promise<DrainOutcome> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<'deadline'>((r) => (timer = setTimeout(() => r('deadline'), deadlineMs)));
  s.log.info(`draining: no new requests; in-flight ones have ${deadlineMs} ms to finish`);
  const outcome = await Promise.race([s.stop().then(() => 'drained' as const), deadline]);
  clearTimeout(timer);
  if (outcome === 'deadline') {
    s.log.warn(`drain deadline passed: ${s.active.size} running requests are cut`);
    s.active.cutAll('The server is shutting down: its drain deadline passed before this request finished.');
    await Promise.race([s.whenIdle(), sleep(CUT_FLUSH_MS)]);
    await sleep(50); // the cut streams' last frames are written on the next ticks
  }
  return outcome;
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
