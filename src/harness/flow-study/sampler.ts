// system-metrics.csv's sampler: every interval, the gateway's /stats (flow queue, in-flight
// requests and tokens, the gateway's own requests on each replica) and every replica's /metrics
// (engine waiting/running, KV use, preemptions, prefix-cache hits), one row per source per tick.
//
// Ticks are on a fixed grid from t0 (the load generator's start): a tick whose scrapes outlast the
// interval delays the next one, never stacks a second set of scrapes on the servers. A scrape that
// fails leaves its row's values empty and `scrape_ok` false, so a gap is visible, not zero.
import { performance } from 'node:perf_hooks';
import { getJson, getText, sumSeries } from './topology.ts';

export const SYSTEM_COLUMNS = [
  'point_id', 't_s', 'source', 'scrape_ok', 'flow_queue_depth', 'flow_inflight_requests', 'flow_inflight_input_tokens',
  'flow_inflight_total_tokens', 'gateway_inflight_to_replica', 'engine_waiting', 'engine_running', 'kv_usage',
  'preemptions_total', 'prefix_cache_query_tokens_total', 'prefix_cache_hit_tokens_total',
] as const;
export type SystemColumn = (typeof SYSTEM_COLUMNS)[number];
export type SystemRow = Record<SystemColumn, string | number | boolean | null>;

const REPLICA_SERIES = [
  'headroom_requests_waiting', 'headroom_requests_running', 'headroom_kv_usage_ratio', 'headroom_preemptions_total',
  'headroom_prefix_cache_query_tokens_total', 'headroom_prefix_cache_hit_tokens_total',
] as const;

interface GatewayStats {
  flow?: { inFlight?: { requests?: number; inputTokens?: number; totalTokens?: number }; queued?: number[] };
  gateway?: { upstreams?: Array<{ url?: string; numInFlight?: number }> };
}

const EMPTY: Omit<SystemRow, 'point_id' | 't_s' | 'source' | 'scrape_ok'> = {
  flow_queue_depth: null, flow_inflight_requests: null, flow_inflight_input_tokens: null, flow_inflight_total_tokens: null,
  gateway_inflight_to_replica: null, engine_waiting: null, engine_running: null, kv_usage: null, preemptions_total: null,
  prefix_cache_query_tokens_total: null, prefix_cache_hit_tokens_total: null,
};

/** One tick: a gateway row and one row per replica (named replica-<i>, in --upstream order). */
export async function sampleOnce(pointId: string, tS: number, gatewayUrl: string, replicaUrls: readonly string[]): Promise<SystemRow[]> {
  const [gw, ...reps] = await Promise.all([getJson(gatewayUrl, '/stats', 2000, 1), ...replicaUrls.map((u) => getText(u, '/metrics', 2000, 1))]);
  const g = gw as GatewayStats | null;
  const rows: SystemRow[] = [
    {
      point_id: pointId, t_s: tS, source: 'gateway', scrape_ok: g !== null, ...EMPTY,
      flow_queue_depth: g?.flow?.queued?.reduce((a, b) => a + b, 0) ?? null,
      flow_inflight_requests: g?.flow?.inFlight?.requests ?? null,
      flow_inflight_input_tokens: g?.flow?.inFlight?.inputTokens ?? null,
      flow_inflight_total_tokens: g?.flow?.inFlight?.totalTokens ?? null,
    },
  ];
  replicaUrls.forEach((url, i) => {
    const text = reps[i] as string | null;
    const m = text === null ? new Map<string, number>() : sumSeries(text, REPLICA_SERIES);
    const up = g?.gateway?.upstreams?.find((u) => u.url === url);
    rows.push({
      point_id: pointId, t_s: tS, source: `replica-${i}`, scrape_ok: text !== null, ...EMPTY,
      gateway_inflight_to_replica: up?.numInFlight ?? null,
      engine_waiting: m.get('headroom_requests_waiting') ?? null,
      engine_running: m.get('headroom_requests_running') ?? null,
      kv_usage: m.get('headroom_kv_usage_ratio') ?? null,
      preemptions_total: m.get('headroom_preemptions_total') ?? null,
      prefix_cache_query_tokens_total: m.get('headroom_prefix_cache_query_tokens_total') ?? null,
      prefix_cache_hit_tokens_total: m.get('headroom_prefix_cache_hit_tokens_total') ?? null,
    });
  });
  return rows;
}

export interface Sampler {
  /** Stops ticking and resolves with every row taken, in time order. */
  stop(): Promise<SystemRow[]>;
}

/** Samples from now until stop(); t_s is seconds since `t0` (a performance.now() value). */
export function startSampler(pointId: string, t0: number, intervalMs: number, gatewayUrl: string, replicaUrls: readonly string[]): Sampler {
  const rows: SystemRow[] = [];
  let stopped = false;
  let wake: (() => void) | null = null;
  const loop = (async () => {
    for (let k = 0; !stopped; k++) {
      const dueMs = t0 + k * intervalMs;
      const waitMs = dueMs - performance.now();
      if (waitMs < -intervalMs) continue; // a slow tick: skip grid points already past, never stack
      if (waitMs > 0) {
        await new Promise<void>((r) => {
          const timer = setTimeout(r, waitMs);
          wake = () => {
            clearTimeout(timer);
            r();
          };
        });
        wake = null;
        if (stopped) break;
      }
      rows.push(...(await sampleOnce(pointId, Math.round(k * intervalMs) / 1000, gatewayUrl, replicaUrls)));
    }
  })();
  return {
    stop: async () => {
      stopped = true;
      wake?.();
      await loop;
      return rows;
    },
  };
}
