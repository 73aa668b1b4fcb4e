// The study's headline tables: the ladder (peak goodput and tails per rung, min–max over seeds),
// the metric-by-load grids, and SLO sensitivity. Every cell is a mean over seeds of a per-run
// number recomputed from records (data.ts); the anchor's second run per block is left out here
// (it is the drift measurement, checks.ts).
import { rungById } from '../ladder/plan.ts';
import type { Study, StudyRun } from './data.ts';
import { pointRuns, studyRungs } from './data.ts';
import type { Agg, Table } from './table.ts';
import { agg, fmtAgg, fmtNum, fmtPct } from './table.ts';

const s1 = (ms: number): number => ms / 1000;

/** Per-run number over the seeds of one point. */
export function pointAgg(s: Study, rungId: string, rate: number, f: (r: StudyRun) => number): Agg {
  return agg(pointRuns(s, rungId, rate).map(f));
}

/** The rate where the seed-mean of `f` is largest (lowest such rate on a tie), or null. */
function peak(s: Study, rungId: string, f: (r: StudyRun) => number): { rate: number; a: Agg } | null {
  let best: { rate: number; a: Agg } | null = null;
  for (const rate of s.rates) {
    const a = pointAgg(s, rungId, rate, f);
    if (a.n > 0 && (best === null || a.mean > best.a.mean)) best = { rate, a };
  }
  return best;
}

/**
 * Whether there are enough requests per point for a p99, said on every table that shows one. A
 * per-run p99 over n requests is interpolated between the two slowest when n < 100 (it is the
 * maximum, not a tail estimate); at n >= 1000 about ten requests lie above it.
 */
export function requestsNote(s: Study): string {
  const ns = s.runs.filter((r) => r.row.rep === 1).map((r) => r.summary.num_arrivals);
  if (ns.length === 0) return 'No finished runs.';
  const lo = Math.min(...ns);
  const hi = Math.max(...ns);
  const few = ns.filter((n) => n < 100).length;
  const verdict =
    lo >= 1000 ? 'enough for a p99 everywhere (at least ten requests above it)'
      : lo >= 100 ? `enough for a p99 only roughly where a run has fewer than 1000 (fewer than ten requests above it)`
        : `NOT enough for a p99 in ${few} of ${ns.length} runs (under 100 requests, where the p99 is about the maximum)`;
  return `Requests per point: ${lo}–${hi} steady arrivals per run, over ${s.config.seeds.length} seed(s); ${verdict}.`;
}

export function ladderTable(s: Study): Table {
  const top = s.rates.at(-1) ?? NaN;
  const slo = `${s1(s.config.sloMs)} s`;
  const rows = studyRungs(s).map((id) => {
    const rung = rungById(id);
    const p = peak(s, id, (r) => r.summary.request_goodput);
    const at = (f: (r: StudyRun) => number): Agg => (p === null ? agg([]) : pointAgg(s, id, p.rate, f));
    return [
      rung.label,
      rung.isolates,
      p === null ? '-' : fmtAgg(p.a, 2),
      p === null ? '-' : String(p.rate),
      fmtAgg(at((r) => s1(r.summary.median_ttft_ms)), 2),
      fmtAgg(at((r) => s1(r.summary.p99_ttft_ms)), 2),
      fmtAgg(pointAgg(s, id, top, (r) => s1(r.summary.p99_e2el_ms)), 1),
      fmtPct(pointAgg(s, id, top, (r) => r.summary.shed_rate)),
    ];
  });
  return {
    id: 'ladder',
    title: `The ladder: peak goodput at a ${slo} SLO and the tails (${s.config.runner} runner)`,
    headers: ['Config', 'Isolates', `Peak goodput (req/s, SLO ${slo})`, 'at offered (req/s)', 'p50 TTFT at peak (s)', 'p99 TTFT at peak (s)', `p99 E2E at ${top} req/s (s)`, `Refused at ${top} req/s`],
    rows,
    notes: [
      `Mean over seeds, [min–max] over seeds. Peak goodput is the largest seed-mean over the offered-load grid; the latency columns are read at that load, except the last two, read at the top of the grid (${top} req/s) so every rung is compared at the same overload.`,
      requestsNote(s),
    ],
  };
}

interface GridMetric {
  readonly id: string;
  readonly title: string;
  readonly f: (r: StudyRun) => number;
  readonly show: (a: Agg) => string;
  readonly note: string;
}

const GRID: readonly GridMetric[] = [
  { id: 'grid-goodput', title: 'Goodput (req/s inside the SLO)', f: (r) => r.summary.request_goodput, show: (a) => fmtAgg(a, 2), note: 'Completed inside the SLO per second of the steady window.' },
  { id: 'grid-p99-e2e', title: 'p99 end-to-end latency (s)', f: (r) => s1(r.summary.p99_e2el_ms), show: (a) => fmtAgg(a, 1), note: 'From intended arrival; requests past the client timeout count as >timeout.' },
  { id: 'grid-refused', title: 'Refused (503) share of arrivals', f: (r) => r.summary.shed_rate, show: fmtPct, note: 'Refused by admission control at arrival; rungs 1–4 run with admission off.' },
  { id: 'grid-attainment-admitted', title: 'SLO attainment among admitted', f: (r) => r.summary.slo_attainment_admitted, show: fmtPct, note: 'Of the requests not refused, the share that finished inside the SLO: the promise the controller kept.' },
];

/** One table per metric: rungs down, offered loads across. */
export function gridTables(s: Study): Table[] {
  return GRID.map((m) => ({
    id: m.id,
    title: m.title,
    headers: ['Config', ...s.rates.map((r) => `${r} req/s`)],
    rows: studyRungs(s).map((id) => [rungById(id).label, ...s.rates.map((rate) => m.show(pointAgg(s, id, rate, m.f)))]),
    notes: [`${m.note} Mean over seeds [min–max].`, requestsNote(s)],
  }));
}

/** Peak goodput at a few SLOs, recomputed from the same records: how much hangs on where the line is drawn. */
export function sensitivityTable(s: Study): Table {
  const rows = studyRungs(s).map((id) => [
    rungById(id).label,
    ...s.sensitivitySlosMs.map((_, k) => {
      const p = peak(s, id, (r) => r.sensitivity[k]?.goodput ?? NaN);
      return p === null ? '-' : `${fmtAgg(p.a, 2)} @ ${p.rate}`;
    }),
  ]);
  return {
    id: 'slo-sensitivity',
    title: 'SLO sensitivity: peak goodput (req/s @ offered req/s) at other SLOs',
    headers: ['Config', ...s.sensitivitySlosMs.map((ms) => `SLO ${fmtNum(s1(ms), 1)} s`)],
    rows,
    notes: ['Recomputed from every run\'s records at each SLO; the servers\' own budget stayed at the study SLO, so rung 5 decided against that one.', requestsNote(s)],
  };
}
