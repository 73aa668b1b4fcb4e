// One vocabulary for "not now": every reason a request is refused before it runs, mapped once to
// the error code a client sees (and so, through the error catalog, its HTTP status and type), a
// default message, and the metric label (`headroom_refusals_total{reason}`, the key itself).
// Flow control, admission control and both backends (engine and gateway) refuse only with these reasons.
// The codes are named at the bottom (util/request-error.ts); their HTTP status is the API's catalog.

import type { ErrorCode } from '../util/request-error.ts';

interface RefusalEntry {
  readonly code: ErrorCode;
  readonly message: string;
}

export const REFUSALS = {
  /** The engine holds as many requests as it may (`--max-queued`). */
  capacity: { code: 'capacity', message: 'The server holds as many requests as it can; retry shortly.' },
  /** The server is shutting down. */
  draining: { code: 'draining', message: 'The server is shutting down; retry on another replica.' },
  /** The step loop failed; the process is about to be restarted. */
  engine_failed: { code: 'engine_unavailable', message: 'The engine failed and is being restarted; retry shortly.' },
  /** Admission control: the calibrated latency bound does not fit the request's budget. */
  conformal: { code: 'slo_unattainable', message: 'This request cannot finish inside its latency budget now; retry later.' },
  /** Flow control: a request or token cap, a band's share, or a tenant's allowance is used up. */
  flow_cap: { code: 'rate_limited', message: 'Too many requests in flight for this client or band; retry shortly.' },
  /** Gateway mode: no upstream serving the model is healthy (all ejected, or every one tried failed). */
  no_upstream: { code: 'engine_unavailable', message: 'No upstream server for this model is available; retry shortly.' },
} as const satisfies Record<string, RefusalEntry>;

export type RefusalReason = keyof typeof REFUSALS;
export const REFUSAL_REASONS = Object.keys(REFUSALS) as RefusalReason[];

export interface Refusal {
  readonly reason: RefusalReason;
  /** What the client reads; the vocabulary's default unless the refuser knows better. */
  readonly message: string;
  /** Retry-After in whole seconds (null: the server default). */
  readonly retryAfterS: number | null;
}

export function refusal(reason: RefusalReason, opts: { message?: string; retryAfterS?: number | null } = {}): Refusal {
  return { reason, message: opts.message ?? REFUSALS[reason].message, retryAfterS: opts.retryAfterS ?? null };
}
