// One row per request: what the generator intended, what it did, and what came back. Rows are
// never dropped — warm-up, cool-down, shed, failed and timed-out requests are all rows, flagged by
// columns, so every analysis can be redone from raw records with different choices.
//
// Times are milliseconds from the run's start (performance.now() at t0). Every latency is
// measured from the *intended* arrival, so a generator that sends late is charged for it
// (coordinated omission shows up as latency, not as missing samples).

/** How the request ended. */
export type Outcome =
  /** 2xx and the stream finished with [DONE] (or the body ended cleanly). */
  | 'ok'
  /** 503 or 429: the server refused it on purpose (admission / flow control). Not an error. */
  | 'shed'
  /** Any other non-2xx status. */
  | 'http_error'
  /** No HTTP status, or the stream broke mid-way: connection refused/reset, bad SSE. */
  | 'transport_error'
  /** The client gave up at --timeout-s: right-censored, latency known only to exceed it. */
  | 'timeout';

export type Phase = 'warmup' | 'steady' | 'cooldown';
export type LoopKind = 'open' | 'closed';

export interface RequestRecord {
  /** Index in the schedule (open loop) or issue order (closed loop). */
  request_id: number;
  /** Which loop produced the row: 'open' (scheduled arrivals) or 'closed' (N workers). */
  loop: LoopKind;
  /** Closed-loop worker index; null in open loop. */
  worker: number | null;
  /** Workload class (chat: shared/unique; mixed: short/medium/long; uniform). */
  klass: string;
  /** Shared system prompt index, or null. */
  prefix_id: number | null;
  /** Phase by intended arrival; only 'steady' rows enter the headline numbers. */
  phase: Phase;
  /** Intended arrival (ms from t0). Closed loop: equal to sent_ms. */
  intended_ms: number;
  /** When the request was handed to the HTTP client (ms from t0). */
  sent_ms: number;
  /** sent_ms - intended_ms: how late the generator was. */
  slip_ms: number;
  /** When response headers arrived (ms from t0), or null. */
  headers_ms: number | null;
  /** First content token - intended arrival, or null if none came. */
  ttft_ms: number | null;
  /** End of the response stream - intended arrival, for 'ok' rows; else null. */
  e2e_ms: number | null;
  /** When the row ended for any reason (ms from t0): done, error, or timeout. */
  end_ms: number;
  /** Gaps between successive content chunks, ms. */
  itl_ms: number[];
  /** Content chunks received (≈ output tokens when the server streams one token per chunk). */
  num_chunks: number;
  /** The harness's estimate of the prompt's tokens. */
  prompt_tokens_est: number;
  /** usage.prompt_tokens from the server, or null if it sent no usage. */
  prompt_tokens: number | null;
  /** usage.completion_tokens from the server, or null. */
  completion_tokens: number | null;
  /** max_tokens requested; null when none was sent (a natural-length workload without a cap). */
  max_tokens: number | null;
  /** HTTP status, null if none arrived (transport error before headers). */
  http_status: number | null;
  outcome: Outcome;
  /** For 'shed' rows: the server's error code/type if it sent one, else 'http_<status>'. */
  shed_reason: string | null;
  /** Retry-After in seconds, if the server sent one. */
  retry_after_s: number | null;
  /** Transport or protocol error message; null otherwise. */
  error: string | null;
  /** True when the client timed out (the latency is right-censored at end_ms - intended_ms). */
  censored: boolean;
}

/** Column names and DuckDB types, in file order. The Parquet schema is exactly this. */
export const RECORD_COLUMNS: ReadonlyArray<readonly [keyof RequestRecord, string]> = [
  ['request_id', 'INTEGER'],
  ['loop', 'VARCHAR'],
  ['worker', 'INTEGER'],
  ['klass', 'VARCHAR'],
  ['prefix_id', 'INTEGER'],
  ['phase', 'VARCHAR'],
  ['intended_ms', 'DOUBLE'],
  ['sent_ms', 'DOUBLE'],
  ['slip_ms', 'DOUBLE'],
  ['headers_ms', 'DOUBLE'],
  ['ttft_ms', 'DOUBLE'],
  ['e2e_ms', 'DOUBLE'],
  ['end_ms', 'DOUBLE'],
  ['itl_ms', 'DOUBLE[]'],
  ['num_chunks', 'INTEGER'],
  ['prompt_tokens_est', 'INTEGER'],
  ['prompt_tokens', 'INTEGER'],
  ['completion_tokens', 'INTEGER'],
  ['max_tokens', 'INTEGER'],
  ['http_status', 'INTEGER'],
  ['outcome', 'VARCHAR'],
  ['shed_reason', 'VARCHAR'],
  ['retry_after_s', 'DOUBLE'],
  ['error', 'VARCHAR'],
  ['censored', 'BOOLEAN'],
];

/** Phase of an arrival at intendedMs in a run of durationMs with the given edges. */
export function phaseOf(intendedMs: number, durationMs: number, warmupMs: number, cooldownMs: number): Phase {
  if (intendedMs < warmupMs) return 'warmup';
  if (intendedMs >= durationMs - cooldownMs) return 'cooldown';
  return 'steady';
}
