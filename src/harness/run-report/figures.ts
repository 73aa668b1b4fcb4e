// A single run's figures: latency CDFs, goodput over a range of SLOs, and rates, tokens and latency
// over the run. Vega-Lite specs rendered to SVG by the study report's renderer (specSvg), with the
// same config, so both pages draw alike. Every spec inlines its data; nothing depends on the clock.
import type { TopLevelSpec } from 'vega-lite';
import { fmt } from '../format.ts';
import type { RequestRecord } from '../record.ts';
import type { Summary } from '../report.ts';
import { FIGURE_CONFIG, specSvg } from '../study-report/figures.ts';
import { Buckets, chunksOverTime, goodputBySlo, latencyCdfs, latencyOverTime, ratesOverTime, spanS } from './series.ts';

/** A figure of the run page: `id` is the page's element id (`fig-<id>`). */
export interface RunFigure {
  readonly id: string;
  readonly title: string;
  readonly svg: string;
}

/** What the figures need besides the rows (from meta.json and the command line). */
export interface RunFigureInput {
  readonly records: readonly RequestRecord[];
  readonly summary: Summary;
  readonly sloMs: number;
  readonly windowS: number;
  readonly timeoutMs: number;
  readonly durationS: number;
  readonly warmupS: number;
  readonly cooldownS: number;
}

const SIZE = { width: 640, height: 260 };
const DASHED = { type: 'rule', strokeDash: [4, 4], color: '#666' };

function spec(title: string, values: readonly object[], layer: readonly object[]): TopLevelSpec {
  return { $schema: 'https://vega.github.io/schema/vega-lite/v6.json', title, ...SIZE, data: { values }, layer, config: FIGURE_CONFIG } as unknown as TopLevelSpec;
}

const series = { field: 'series', type: 'nominal', title: null, sort: null };

/** Grey bands over the warm-up and cool-down edges: their rows are drawn but not counted. */
function edges(i: RunFigureInput): object[] {
  const bands = [
    ...(i.warmupS > 0 ? [{ from: 0, to: i.warmupS }] : []),
    ...(i.cooldownS > 0 ? [{ from: i.durationS - i.cooldownS, to: i.durationS }] : []),
  ];
  return bands.length === 0 ? [] : [{ data: { values: bands }, mark: { type: 'rect', color: '#eee' }, encoding: { x: { field: 'from', type: 'quantitative' }, x2: { field: 'to' } } }];
}

function overTime(title: string, yTitle: string, values: readonly object[], i: RunFigureInput, buckets: Buckets, extra: readonly object[] = []): TopLevelSpec {
  const x = { field: 't_s', type: 'quantitative', title: 'time from the run\'s start (s)', scale: { domain: [0, buckets.spanS] } };
  return spec(title, values, [
    ...edges(i),
    { mark: { type: 'line', point: buckets.numBuckets <= 60 }, encoding: { x, y: { field: 'value', type: 'quantitative', title: yTitle }, color: series } },
    ...extra,
  ]);
}

export async function runFigures(i: RunFigureInput): Promise<RunFigure[]> {
  const sloS = i.sloMs / 1000;
  const buckets = new Buckets(spanS(i.records, i.durationS));
  const bucket = buckets.widthS === 1 ? 'one-second' : `${buckets.widthS}-second`;
  const sloRuleX = { data: { values: [{ v: i.sloMs }] }, mark: DASHED, encoding: { x: { field: 'v', type: 'quantitative' } } };

  const cdfs = latencyCdfs(i.records).filter((p) => p.latency_ms > 0);
  const cdfSpec = spec('Latency CDF', cdfs, [
    {
      mark: { type: 'line', interpolate: 'step-after' },
      encoding: {
        x: { field: 'latency_ms', type: 'quantitative', title: 'latency from intended arrival (ms)', scale: { type: 'log' } },
        y: { field: 'share', type: 'quantitative', title: 'share of requests', scale: { domain: [0, 1] } },
        color: series,
      },
    },
    sloRuleX,
  ]);

  const goodput = goodputBySlo(i.records, i.sloMs, i.windowS);
  const atSlo = [{ slo_ms: i.sloMs, goodput: i.summary.request_goodput, label: `${i.summary.request_goodput.toFixed(2)} req/s at ${sloS} s` }];
  const goodputSpec = spec(`Goodput vs E2E SLO (${fmt(100 * i.summary.slo_attainment, 0)}% of steady arrivals within ${sloS} s)`, goodput, [
    { mark: { type: 'line', interpolate: 'step-after' }, encoding: { x: { field: 'slo_ms', type: 'quantitative', title: 'E2E SLO (ms)' }, y: { field: 'goodput', type: 'quantitative', title: 'goodput (req/s)' } } },
    sloRuleX,
    { data: { values: atSlo }, mark: { type: 'point', filled: true, size: 60, color: '#d62728' }, encoding: { x: { field: 'slo_ms', type: 'quantitative' }, y: { field: 'goodput', type: 'quantitative' } } },
    { data: { values: atSlo }, mark: { type: 'text', align: 'left', dx: 8, dy: 14 }, encoding: { x: { field: 'slo_ms', type: 'quantitative' }, y: { field: 'goodput', type: 'quantitative' }, text: { field: 'label' } } },
  ]);

  const rates = ratesOverTime(i.records, buckets);
  const chunks = chunksOverTime(i.records, buckets);
  const latency = latencyOverTime(i.records, buckets, i.timeoutMs).map((p) => ({ ...p, value: p.value / 1000 }));
  const sloRuleY = { data: { values: [{ v: sloS }] }, mark: DASHED, encoding: { y: { field: 'v', type: 'quantitative' } } };
  const edgeNote = i.warmupS > 0 || i.cooldownS > 0 ? ' Grey: the warm-up and cool-down edges, drawn but not counted.' : '';
  const figures: Array<[string, string, TopLevelSpec]> = [
    ['latency-cdf', `TTFT and E2E latency CDFs of the steady requests, from intended arrival (log scale; dashed: the ${sloS} s SLO). A timed-out request keeps the E2E curve below 1.`, cdfSpec],
    ['goodput-slo', `Goodput (completed within the SLO per second of steady window) at a range of E2E SLOs; the dot is the run's ${sloS} s SLO.`, goodputSpec],
    ['rates-over-time', `Arrivals (by intended arrival), completions and refusals (by when they ended) per second, in ${bucket} buckets.${edgeNote}`, overTime('Requests per second over the run', 'requests/s', rates, i, buckets)],
    ['latency-over-time', `TTFT p50, E2E p50 and p99 of the requests arriving in each ${bucket} bucket (dashed: the ${sloS} s SLO; a timeout is drawn at the timeout).${edgeNote}`, overTime('Latency over the run, by arrival', 'latency (s)', latency, i, buckets, [sloRuleY])],
    ['tokens-over-time', `Streamed content chunks (≈ output tokens) per second, in ${bucket} buckets.${edgeNote}`, overTime('Streamed tokens per second over the run', 'chunks/s', chunks, i, buckets)],
  ];
  return Promise.all(figures.map(async ([id, title, s]) => ({ id, title, svg: await specSvg(s) })));
}
