// The study's figures: Vega-Lite specs compiled to Vega and rendered headless (View.toSVG, no
// browser, no canvas), then rasterised to PNG with resvg. Data is inlined in each spec, sorted,
// and the renderer is fed nothing time- or machine-dependent, so the SVG is a function of the data
// (the PNG also of the installed fonts). x is offered load, not achieved throughput: throughput
// saturates and would fold the whole overload region into one point.
import * as vega from 'vega';
import { compile } from 'vega-lite';
import type { TopLevelSpec } from 'vega-lite';
import { Resvg } from '@resvg/resvg-js';
import { rungById } from '../ladder/plan.ts';
import type { Study, StudyRun } from './data.ts';
import { studyRungs } from './data.ts';
import { pointAgg } from './tables.ts';

export interface Figure {
  readonly id: string;
  readonly title: string;
  readonly svg: string;
  readonly png: Buffer;
}

/** Vega-Lite's config for every figure: one font (the PNG's rasteriser has it), long legend labels. */
export const FIGURE_CONFIG = { font: 'DejaVu Sans', legend: { labelLimit: 320 } };

interface Point {
  rung: string;
  rate: number;
  mean: number;
  min: number;
  max: number;
}

function points(s: Study, f: (r: StudyRun) => number, clip: (v: number) => number = (v) => v): Point[] {
  return studyRungs(s).flatMap((id) =>
    s.rates.flatMap((rate) => {
      const a = pointAgg(s, id, rate, f);
      return a.n === 0 ? [] : [{ rung: rungById(id).label, rate, mean: clip(a.mean), min: clip(a.min), max: clip(a.max) }];
    }),
  );
}

function bandSpec(title: string, yTitle: string, values: Point[], opts: { logY?: boolean; rule?: number; ruleLabel?: string } = {}): TopLevelSpec {
  const y = { field: 'mean', type: 'quantitative' as const, title: yTitle, ...(opts.logY ? { scale: { type: 'log' as const } } : {}) };
  const color = { field: 'rung', type: 'nominal' as const, title: 'rung', sort: null };
  const layers: unknown[] = [
    { mark: { type: 'area', opacity: 0.18 }, encoding: { x: { field: 'rate', type: 'quantitative' }, y: { field: 'min', type: 'quantitative', ...(opts.logY ? { scale: { type: 'log' } } : {}) }, y2: { field: 'max' }, color } },
    { mark: { type: 'line', point: true }, encoding: { x: { field: 'rate', type: 'quantitative', title: 'offered load (req/s)' }, y, color } },
  ];
  if (opts.rule !== undefined) layers.push({ data: { values: [{ v: opts.rule }] }, mark: { type: 'rule', strokeDash: [4, 4], color: '#666' }, encoding: { y: { field: 'v', type: 'quantitative' } } });
  return { $schema: 'https://vega.github.io/schema/vega-lite/v6.json', title, width: 520, height: 300, data: { values }, layer: layers, config: FIGURE_CONFIG } as unknown as TopLevelSpec;
}

/** A Vega-Lite spec as SVG, headless; a function of the spec (the run report uses it too). */
export async function specSvg(spec: TopLevelSpec): Promise<string> {
  const view = new vega.View(vega.parse(compile(spec).spec), { renderer: 'none' });
  const svg = await view.toSVG();
  view.finalize();
  return svg;
}

async function render(id: string, title: string, spec: TopLevelSpec): Promise<Figure> {
  const svg = await specSvg(spec);
  const png = new Resvg(svg, { fitTo: { mode: 'zoom', value: 2 }, font: { loadSystemFonts: true, defaultFontFamily: 'DejaVu Sans' } }).render().asPng();
  return { id, title, svg, png };
}

export async function studyFigures(s: Study): Promise<Figure[]> {
  const slo = s.config.sloMs / 1000;
  const timeout = s.config.timeoutS;
  // A censored p99 (>timeout) is drawn at the timeout: the line reaches the ceiling instead of vanishing.
  const clip = (v: number): number => (v === Infinity ? timeout : v);
  const probe = s.runs.map((r) => ({ index: r.row.index, probe_ms: r.row.probe_ms ?? NaN, rung: rungById(r.row.rung).label }));
  const probeSpec = {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: 'Probe latency before each run, in sweep order', width: 520, height: 220, data: { values: probe },
    mark: { type: 'point', filled: true },
    encoding: { x: { field: 'index', type: 'quantitative', title: 'run (sweep order)' }, y: { field: 'probe_ms', type: 'quantitative', title: 'probe (ms)', scale: { zero: false } }, color: { field: 'rung', type: 'nominal', sort: null } },
    config: FIGURE_CONFIG,
  } as unknown as TopLevelSpec;
  return [
    await render('goodput', 'Goodput vs offered load', bandSpec(`Goodput at a ${slo} s SLO (mean, min–max over seeds)`, 'goodput (req/s)', points(s, (r) => r.summary.request_goodput))),
    await render('p99-e2e', 'p99 end-to-end vs offered load', bandSpec(`p99 end-to-end latency (log; dashed: the ${slo} s SLO)`, 'p99 E2E (s)', points(s, (r) => r.summary.p99_e2el_ms / 1000, clip), { logY: true, rule: slo })),
    await render('refused', 'Refused share vs offered load', bandSpec('Refused (503) share of arrivals', 'refused share', points(s, (r) => r.summary.shed_rate))),
    await render('probe', 'Probe latency over the sweep', probeSpec),
  ];
}
