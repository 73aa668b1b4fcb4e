// The Grafana dashboard, as data: panels of PromQL over the metrics in metrics.ts, rendered to
// Grafana's JSON model by `scripts/gen-dashboard.ts` and checked against the registry — a panel
// that names a metric nobody registers fails `checkDashboard` (and CI) instead of going blank.
//
// The SLO-attainment panel reads the bucket whose upper bound *is* the SLO (buckets.ts makes the
// SLO an exact boundary), so it needs no interpolation; the dashboard is generated for one SLO.

import { sloBuckets } from './buckets.ts';
import { Metrics } from './metrics.ts';
import { promqlNames } from './promql.ts';
import { bug } from '../util/bug.ts';

export interface PanelSpec {
  readonly title: string;
  /** Grafana unit id: 's', 'percentunit', 'short', 'reqps'. */
  readonly unit: string;
  readonly targets: readonly { readonly expr: string; readonly legend: string }[];
  /** Width in Grafana's 24-column grid (default 12). */
  readonly width?: number;
}

const W = '[$__rate_interval]';
const q = (p: number, metric: string, by = ''): string => `histogram_quantile(${p}, sum by (le${by}) (rate(${metric}_bucket${W})))`;

/** The panels, top to bottom. `sloMs` picks the bucket the attainment panel reads. */
export function panels(sloMs: number): PanelSpec[] {
  const le = String(sloBuckets(sloMs).find((b) => b === sloMs / 1000) ?? sloMs / 1000);
  const latency = (title: string, metric: string, withSlo: boolean): PanelSpec => ({
    title,
    unit: 's',
    targets: [
      { expr: q(0.5, metric), legend: 'p50' },
      { expr: q(0.9, metric), legend: 'p90' },
      { expr: q(0.99, metric), legend: 'p99' },
      ...(withSlo ? [{ expr: 'max(headroom_slo_seconds)', legend: 'SLO' }] : []),
    ],
  });
  return [
    {
      title: 'SLO attainment (E2E within the SLO)',
      unit: 'percentunit',
      targets: [{ expr: `sum(rate(headroom_e2e_request_latency_seconds_bucket{le="${le}"}${W})) / clamp_min(sum(rate(headroom_e2e_request_latency_seconds_count${W})), 1e-9)`, legend: `E2E ≤ ${le} s` }],
    },
    {
      title: 'Requests: finished by outcome, refused by reason',
      unit: 'reqps',
      targets: [
        { expr: `sum by (outcome) (rate(headroom_requests_total${W}))`, legend: 'finished: {{outcome}}' },
        { expr: `sum by (reason) (rate(headroom_refusals_total${W}))`, legend: 'refused: {{reason}}' },
      ],
    },
    latency('Time to first token', 'headroom_time_to_first_token_seconds', true),
    latency('End-to-end latency', 'headroom_e2e_request_latency_seconds', true),
    latency('Inter-token latency', 'headroom_inter_token_latency_seconds', false),
    latency('Queue time', 'headroom_request_queue_time_seconds', true),
    {
      title: 'Queue depth and running batch',
      unit: 'short',
      targets: [
        { expr: 'sum(headroom_requests_waiting)', legend: 'waiting' },
        { expr: 'sum(headroom_requests_running)', legend: 'running' },
      ],
    },
    {
      title: 'KV cache',
      unit: 'percentunit',
      targets: [
        { expr: 'max(headroom_kv_usage_ratio)', legend: 'usage' },
        { expr: 'max(headroom_kv_fragmentation_ratio)', legend: 'fragmentation' },
        { expr: 'min(headroom_kv_free_blocks) / clamp_min(max(headroom_kv_blocks), 1)', legend: 'free blocks' },
      ],
    },
    {
      title: 'Prefix cache hit rate (tokens)',
      unit: 'percentunit',
      targets: [{ expr: `sum(rate(headroom_prefix_cache_hit_tokens_total${W})) / clamp_min(sum(rate(headroom_prefix_cache_query_tokens_total${W})), 1e-9)`, legend: 'hit rate' }],
    },
    {
      title: 'Preemptions and copy-on-write',
      unit: 'ops',
      targets: [
        { expr: `sum(rate(headroom_preemptions_total${W}))`, legend: 'preemptions/s' },
        { expr: `sum(rate(headroom_kv_copy_on_write_total${W}))`, legend: 'copy-on-write/s' },
      ],
    },
    {
      title: 'Token throughput',
      unit: 'short',
      targets: [
        { expr: `sum(rate(headroom_prompt_tokens_total${W}))`, legend: 'prompt tok/s' },
        { expr: `sum(rate(headroom_generation_tokens_total${W}))`, legend: 'generation tok/s' },
      ],
    },
    {
      title: 'Engine step time by kind (p50, p99)',
      unit: 's',
      targets: [
        { expr: q(0.5, 'headroom_engine_step_seconds', ', kind'), legend: 'p50 {{kind}}' },
        { expr: q(0.99, 'headroom_engine_step_seconds', ', kind'), legend: 'p99 {{kind}}' },
      ],
    },
    {
      title: 'Admission decision time and event-loop lag',
      unit: 's',
      targets: [
        { expr: q(0.99, 'headroom_admission_decision_seconds'), legend: 'admission p99' },
        { expr: 'max(nodejs_eventloop_lag_p99_seconds)', legend: 'event-loop lag p99' },
      ],
    },
  ];
}

/** Grafana's dashboard JSON model for `panels` (a Prometheus datasource chosen by a variable). */
export function dashboardJson(specs: readonly PanelSpec[], sloMs: number): Record<string, unknown> {
  let x = 0;
  let y = 0;
  const out = specs.map((p, i) => {
    const w = p.width ?? 12;
    if (x + w > 24) {
      x = 0;
      y += 8;
    }
    const gridPos = { x, y, w, h: 8 };
    x += w;
    return {
      id: i + 1,
      type: 'timeseries',
      title: p.title,
      datasource: { type: 'prometheus', uid: '${datasource}' },
      gridPos,
      fieldConfig: { defaults: { unit: p.unit }, overrides: [] },
      options: { legend: { displayMode: 'list', placement: 'bottom' }, tooltip: { mode: 'multi' } },
      targets: p.targets.map((t, k) => ({ refId: String.fromCharCode(65 + k), expr: t.expr, legendFormat: t.legend, datasource: { type: 'prometheus', uid: '${datasource}' } })),
    };
  });
  return {
    title: 'Headroom',
    uid: 'headroom',
    description: `Generated by scripts/gen-dashboard.ts for a ${sloMs} ms SLO; do not edit by hand.`,
    tags: ['headroom', 'llm'],
    schemaVersion: 39,
    version: 1,
    editable: true,
    refresh: '5s',
    time: { from: 'now-15m', to: 'now' },
    templating: { list: [{ name: 'datasource', label: 'Prometheus', type: 'datasource', query: 'prometheus', current: {}, hide: 0 }] },
    annotations: { list: [] },
    panels: out,
  };
}

/** Every PromQL expression in a dashboard JSON (any `expr` string, however deep). */
export function dashboardExprs(dashboard: unknown): string[] {
  const out: string[] = [];
  const walk = (v: unknown): void => {
    if (Array.isArray(v)) v.forEach(walk);
    else if (v !== null && typeof v === 'object') {
      for (const [k, x] of Object.entries(v)) {
        if (k === 'expr' && typeof x === 'string') out.push(x);
        else walk(x);
      }
    }
  };
  walk(dashboard);
  return out;
}

/** Problems with a dashboard: series it reads that are not registered, functions PromQL lacks. Empty = good. */
export function checkDashboard(dashboard: unknown, registered: ReadonlySet<string>): string[] {
  const problems: string[] = [];
  const exprs = dashboardExprs(dashboard);
  if (exprs.length === 0) problems.push('the dashboard has no PromQL expressions');
  for (const expr of exprs) {
    const { series, unknownFunctions } = promqlNames(expr);
    if (series.length === 0) problems.push(`reads no metric: ${expr}`);
    for (const s of series) if (!registered.has(s)) problems.push(`unregistered metric '${s}' in: ${expr}`);
    for (const f of unknownFunctions) problems.push(`unknown function '${f}' in: ${expr}`);
  }
  return problems;
}

/** The series a Headroom server registers (built from a registry no engine feeds: names only). */
export function registeredSeries(sloMs: number): Set<string> {
  const stats = (): never => {
    bug('registeredSeries() registry was scraped');
  };
  return new Metrics({ sloMs, modelName: 'names-only', stats }).seriesNames();
}

/** The committed dashboard file's text for an SLO; throws if any query names an unregistered metric. */
export function renderDashboard(sloMs: number): string {
  const dash = dashboardJson(panels(sloMs), sloMs);
  const problems = checkDashboard(dash, registeredSeries(sloMs));
  if (problems.length > 0) throw new Error(`dashboard: ${problems.length} bad queries:\n  ${problems.join('\n  ')}`);
  return JSON.stringify(dash, null, 2) + '\n';
}
