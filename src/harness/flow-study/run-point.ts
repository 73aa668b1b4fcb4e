// One point of the study: start the gateway with the point's cap in front of the running
// replicas, drive it (closed loop with the harness's runClosedLoop, or open-loop gamma arrivals
// with runOpenLoop — the study has no HTTP client or arrival generator of its own), sample the
// system every interval while it runs, then read the gateway's routes and flow decisions and the
// replicas' prefix-cache counters, and stop the gateway.
//
// Invariants: the gateway is stopped in `finally`, whatever happens; t0 of the sampler is taken
// immediately before the generator's (both are synchronous before the generator's first await),
// so system-metrics.csv and request-results.csv share one clock within microseconds.
import { performance } from 'node:perf_hooks';
import { arrivalTimesMs } from '../arrivals.ts';
import type { ClientOptions } from '../client.ts';
import { runClosedLoop, runOpenLoop } from '../generator.ts';
import type { RequestRecord } from '../record.ts';
import { quantileSorted, sortedCopy } from '../stats.ts';
import { Workload } from '../workloads.ts';
import type { EvidenceRow } from './evidence.ts';
import type { PointPlan } from './points.ts';
import type { SystemRow } from './sampler.ts';
import { startSampler } from './sampler.ts';
import { GATEWAY_READY, getJson, getText, prefixCacheOffInStats, startHeadroom, sumSeries } from './topology.ts';
import type { Proc } from './topology.ts';

/** What every point shares: the load's shape and the gates' thresholds. */
export interface PointEnv {
  readonly replicaUrls: readonly string[];
  readonly replicaArgs: readonly string[];
  readonly model: string;
  readonly durationS: number;
  readonly warmupS: number;
  readonly cooldownS: number;
  readonly timeoutS: number;
  readonly tokensPerWord: number;
  readonly contextTokens: number;
  readonly mix: readonly [number, number, number];
  readonly promptTokens: number;
  readonly outputTokens: number;
  readonly gammaShape: number;
  readonly flowQueueSize: number;
  readonly flowQueueTtlMs: number;
  readonly sampleIntervalMs: number;
  readonly minRowsForP95: number;
  readonly maxSlipP99Ms: number;
}

export interface PointResult {
  readonly records: RequestRecord[];
  readonly system: SystemRow[];
  /** run-evidence.csv's row, label filled in when the files are written. */
  readonly evidence: EvidenceRow;
  readonly windowS: number;
}

export function workloadFor(plan: PointPlan, env: PointEnv): Workload {
  return new Workload({
    kind: plan.workload, seed: plan.seed, tokensPerWord: env.tokensPerWord, contextTokens: env.contextTokens,
    mix: env.mix, promptTokens: env.promptTokens, outputTokens: env.outputTokens,
  });
}

export function gatewayArgs(plan: PointPlan, env: PointEnv): string[] {
  return [
    // Admission control off, stated rather than left to the default: the study measures flow control alone.
    'gateway', ...env.replicaUrls.flatMap((u) => ['--upstream', u]), '--host', '127.0.0.1', '--port', '0', '--log-format', 'text', '--admission', 'off',
    '--scrape-interval-ms', '500', '--flow-queue-size', String(env.flowQueueSize), '--flow-queue-ttl-ms', String(env.flowQueueTtlMs),
    ...plan.gatewayFlags,
  ];
}

async function replicasIdle(urls: readonly string[], timeoutMs: number): Promise<boolean> {
  const until = performance.now() + timeoutMs;
  for (;;) {
    const texts = await Promise.all(urls.map((u) => getText(u, '/metrics', 2000)));
    const busy = texts.some((t) => {
      if (t === null) return true;
      const m = sumSeries(t, ['headroom_requests_waiting', 'headroom_requests_running']);
      return (m.get('headroom_requests_waiting') ?? 1) + (m.get('headroom_requests_running') ?? 1) > 0;
    });
    if (!busy) return true;
    if (performance.now() > until) return false;
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** headroom_flow_decisions_total summed by reason, from the gateway's /metrics. */
function flowDecisions(text: string | null): Map<string, number> {
  const out = new Map<string, number>();
  for (const m of (text ?? '').matchAll(/^headroom_flow_decisions_total\{[^}]*reason="([a-z_]+)"[^}]*\}\s+(\S+)/gm)) {
    out.set(m[1]!, (out.get(m[1]!) ?? 0) + Number(m[2]));
  }
  return out;
}

/** Starts the point's gateway; a start that fails is tried once more (a transient failure, not the cap, should not end a study). */
async function startGateway(args: readonly string[]): Promise<Proc> {
  try {
    return await startHeadroom(args, GATEWAY_READY, 60_000);
  } catch {
    await new Promise((r) => setTimeout(r, 2000));
    return startHeadroom(args, GATEWAY_READY, 60_000);
  }
}

export async function runPoint(plan: PointPlan, env: PointEnv): Promise<PointResult> {
  const idle = await replicasIdle(env.replicaUrls, 60_000);
  const args = gatewayArgs(plan, env);
  const startedAt = new Date().toISOString();
  const gw = await startGateway(args);
  try {
    const u = new URL(gw.url);
    const client: ClientOptions = { origin: u.origin, path: '/v1/chat/completions', model: env.model, timeoutMs: env.timeoutS * 1000, sloHeaderMs: null, ignoreEos: true };
    const edges = { durationMs: env.durationS * 1000, warmupMs: env.warmupS * 1000, cooldownMs: env.cooldownS * 1000 };
    const workload = workloadFor(plan, env);
    const arrivals = plan.loop === 'open'
      ? arrivalTimesMs({ kind: 'gamma', ratePerS: plan.ratePerS, durationS: env.durationS, gammaShape: env.gammaShape, seed: plan.seed })
      : new Float64Array(0);
    const specs = Array.from({ length: arrivals.length }, () => workload.next());
    const t0 = performance.now();
    const sampler = startSampler(plan.id, t0, env.sampleIntervalMs, gw.url, env.replicaUrls);
    let records: RequestRecord[];
    let system: SystemRow[] = [];
    try {
      records = plan.loop === 'open'
        ? await runOpenLoop({ client, arrivalsMs: arrivals, specs, ...edges })
        : await runClosedLoop({ client, concurrency: plan.concurrency, nextSpec: () => workload.next(), ...edges });
    } finally {
      system = await sampler.stop();
    }
    const [gwStats, gwMetrics, ...repStats] = await Promise.all([
      getJson(gw.url, '/stats'), getText(gw.url, '/metrics'), ...env.replicaUrls.map((r) => getJson(r, '/stats')),
    ]);
    const repMetrics = await Promise.all(env.replicaUrls.map((r) => getText(r, '/metrics')));
    return { records, system, windowS: env.durationS - env.warmupS - env.cooldownS, evidence: evidenceOf(plan, env, { args, startedAt, idle, records, system, gwStats, gwMetrics, repStats, repMetrics }) };
  } finally {
    await gw.stop();
  }
}

interface Observed {
  args: readonly string[];
  startedAt: string;
  idle: boolean;
  records: readonly RequestRecord[];
  system: readonly SystemRow[];
  gwStats: unknown;
  gwMetrics: string | null;
  repStats: readonly unknown[];
  repMetrics: ReadonlyArray<string | null>;
}

function evidenceOf(plan: PointPlan, env: PointEnv, o: Observed): EvidenceRow {
  const ups = (o.gwStats as { gateway?: { upstreams?: Array<{ url?: string; numForwarded?: number }> } } | null)?.gateway?.upstreams ?? [];
  const routes = env.replicaUrls.map((url, i) => `replica-${i}:${ups.find((x) => x.url === url)?.numForwarded ?? 'n/a'}`).join(';');
  const counters = o.repMetrics.map((t) => sumSeries(t ?? '', ['headroom_prefix_cache_query_tokens_total', 'headroom_prefix_cache_hit_tokens_total']));
  const sumOf = (name: string): number => counters.reduce((s, m) => s + (m.get(name) ?? NaN), 0);
  const queryTokens = sumOf('headroom_prefix_cache_query_tokens_total');
  const hitTokens = sumOf('headroom_prefix_cache_hit_tokens_total');
  const configOff = o.repStats.length > 0 && o.repStats.every(prefixCacheOffInStats);
  const gwRows = o.system.filter((r) => r.source === 'gateway');
  const repRows = o.system.filter((r) => r.source !== 'gateway');
  const maxOf = (rows: readonly SystemRow[], col: keyof SystemRow): number => rows.reduce((m, r) => (typeof r[col] === 'number' ? Math.max(m, r[col]) : m), -Infinity);
  const preemptions = env.replicaUrls.reduce((s, _u, i) => {
    const mine = repRows.filter((r) => r.source === `replica-${i}` && typeof r.preemptions_total === 'number');
    return s + ((mine[mine.length - 1]?.preemptions_total as number | undefined) ?? 0) - ((mine[0]?.preemptions_total as number | undefined) ?? 0);
  }, 0);
  const decisions = flowDecisions(o.gwMetrics);
  const waited = (decisions.get('admitted_after_wait') ?? 0) + (decisions.get('queue_ttl') ?? 0) + (decisions.get('queue_full') ?? 0);
  const steady = o.records.filter((r) => r.phase === 'steady');
  // Steady rows only, like every number of the point: a stall in the warm-up (a cold gateway, a
  // first burst of connections) delays rows that enter nothing.
  const slipP99 = plan.loop === 'open' ? quantileSorted(sortedCopy(steady.map((r) => r.slip_ms)), 0.99) : NaN;
  const numErrors = o.records.filter((r) => r.outcome === 'http_error' || r.outcome === 'transport_error' || r.outcome === 'timeout').length;
  const gates = {
    gate_prefix_cache_off: configOff && queryTokens === 0 && hitTokens === 0,
    gate_generator_kept_schedule: plan.loop === 'closed' || slipP99 <= env.maxSlipP99Ms,
    gate_enough_for_p95: steady.filter((r) => r.ttft_ms !== null).length >= env.minRowsForP95,
    gate_no_errors: numErrors === 0,
    gate_replicas_idle_at_start: o.idle,
  };
  return {
    point_id: plan.id, phase: plan.phase, config: plan.config, repeat: plan.repeat, label: null, started_at: o.startedAt,
    seed: plan.seed, loop: plan.loop, workload: plan.workload, concurrency: plan.concurrency, rate_rps: plan.ratePerS,
    gamma_shape: plan.loop === 'open' ? env.gammaShape : null,
    gateway_args: o.args.map((a) => (a.startsWith('http://') ? 'URL' : a)).join(' ').replace(/(--upstream URL ?)+/, '--upstream <each replica> '),
    replica_args: env.replicaArgs.join(' '),
    routes, prefix_cache_config_off: configOff, prefix_cache_query_tokens: queryTokens, prefix_cache_hit_tokens: hitTokens,
    max_flow_inflight_requests: maxOf(gwRows, 'flow_inflight_requests'), max_flow_inflight_input_tokens: maxOf(gwRows, 'flow_inflight_input_tokens'),
    max_flow_inflight_total_tokens: maxOf(gwRows, 'flow_inflight_total_tokens'), max_flow_queue_depth: maxOf(gwRows, 'flow_queue_depth'),
    preemptions, max_kv_usage: maxOf(repRows, 'kv_usage'),
    cap_engaged: waited > 0,
    slip_p99_ms: slipP99, num_rows: o.records.length, num_errors: numErrors,
    ...gates,
    gates_passed: Object.values(gates).every(Boolean),
    note: `${plan.note === '' ? '' : `${plan.note}; `}flow decisions: ${[...decisions].map(([k, v]) => `${k}=${v}`).join(' ')}`,
  };
}
