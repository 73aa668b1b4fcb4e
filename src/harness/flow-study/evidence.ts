// The per-request and per-tick evidence tables, derived from request records alone.
//
// traffic-samples.csv is computed from the rows, not sampled live: at every tick t (0, 0.5 s, ...
// up to the last row's end) issued = rows sent by t, completed = rows ended by t (any outcome),
// outstanding = issued − completed, refused = 429/503 rows ended by t. Counting from the rows makes
// the series exact and consistent with request-results.csv by construction (the last tick's
// issued equals the point's row count).
import type { RequestRecord } from '../record.ts';

export const REQUEST_COLUMNS = [
  'point_id', 'request_id', 'class', 'loop', 'phase', 'worker', 'arrival_ms', 'sent_ms', 'status', 'outcome', 'ttft_ms',
  'e2e_ms', 'end_ms', 'prompt_tokens', 'prompt_tokens_est', 'completion_tokens', 'max_tokens', 'refusal_reason', 'retry_after_s', 'error',
] as const;
export type RequestColumn = (typeof REQUEST_COLUMNS)[number];

export const TRAFFIC_COLUMNS = ['point_id', 't_s', 'issued', 'completed', 'outstanding', 'refused'] as const;
export type TrafficColumn = (typeof TRAFFIC_COLUMNS)[number];

export function requestRows(pointId: string, records: readonly RequestRecord[]): Array<Record<RequestColumn, string | number | null>> {
  return records.map((r) => ({
    point_id: pointId,
    request_id: r.request_id,
    class: r.klass,
    loop: r.loop,
    phase: r.phase,
    worker: r.worker,
    arrival_ms: r.intended_ms,
    sent_ms: r.sent_ms,
    status: r.http_status,
    outcome: r.outcome,
    ttft_ms: r.ttft_ms,
    e2e_ms: r.e2e_ms,
    end_ms: r.end_ms,
    prompt_tokens: r.prompt_tokens,
    prompt_tokens_est: r.prompt_tokens_est,
    completion_tokens: r.completion_tokens,
    max_tokens: r.max_tokens,
    refusal_reason: r.shed_reason,
    retry_after_s: r.retry_after_s,
    error: r.error,
  }));
}

export function trafficSamples(pointId: string, records: readonly RequestRecord[], intervalMs: number): Array<Record<TrafficColumn, string | number>> {
  const sent = records.map((r) => r.sent_ms).sort((a, b) => a - b);
  const ended = records.map((r) => r.end_ms).sort((a, b) => a - b);
  const refused = records.filter((r) => r.outcome === 'shed').map((r) => r.end_ms).sort((a, b) => a - b);
  const lastMs = ended[ended.length - 1] ?? 0;
  const out: Array<Record<TrafficColumn, string | number>> = [];
  let i = 0;
  let j = 0;
  let k = 0;
  // One tick past the last end, so the final row holds the point's totals.
  for (let t = 0; ; t += intervalMs) {
    while (i < sent.length && sent[i]! <= t) i++;
    while (j < ended.length && ended[j]! <= t) j++;
    while (k < refused.length && refused[k]! <= t) k++;
    out.push({ point_id: pointId, t_s: t / 1000, issued: i, completed: j, outstanding: i - j, refused: k });
    if (t >= lastMs) break;
  }
  return out;
}

export const EVIDENCE_COLUMNS = [
  'point_id', 'phase', 'config', 'repeat', 'label', 'started_at', 'seed', 'loop', 'workload', 'concurrency', 'rate_rps',
  'gamma_shape', 'gateway_args', 'replica_args', 'routes', 'prefix_cache_config_off', 'prefix_cache_query_tokens',
  'prefix_cache_hit_tokens', 'max_flow_inflight_requests', 'max_flow_inflight_input_tokens', 'max_flow_inflight_total_tokens',
  'max_flow_queue_depth', 'preemptions', 'max_kv_usage', 'cap_engaged', 'slip_p99_ms', 'num_rows', 'num_errors',
  'gate_prefix_cache_off', 'gate_generator_kept_schedule', 'gate_enough_for_p95', 'gate_no_errors', 'gate_replicas_idle_at_start',
  'gates_passed', 'note',
] as const;
export type EvidenceColumn = (typeof EVIDENCE_COLUMNS)[number];
export type EvidenceRow = Record<EvidenceColumn, string | number | boolean | null>;

/** The gates a point must pass to count; each is one column of run-evidence.csv. */
export const GATE_COLUMNS = [
  'gate_prefix_cache_off', 'gate_generator_kept_schedule', 'gate_enough_for_p95', 'gate_no_errors', 'gate_replicas_idle_at_start',
] as const satisfies readonly EvidenceColumn[];
