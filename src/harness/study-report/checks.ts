// The tables that say whether the ladder's comparison can be believed: online coverage of the
// admission bound, everything that got worse, the probe (did the machine change speed under the
// sweep?) and the anchor rung's two runs per block (what position in a block costs).
import { ANCHOR_RUNG_ID, rungById } from '../ladder/plan.ts';
import type { Study, StudyRun } from './data.ts';
import { studyRungs } from './data.ts';
import type { Table } from './table.ts';
import { agg, fmtAgg, fmtNum } from './table.ts';
import { pointAgg, requestsNote } from './tables.ts';

/** Online coverage per rung-5 arm, pooled over seeds and loads, from the traces the servers wrote. */
export function coverageTable(s: Study): Table {
  const arms = studyRungs(s).filter((id) => rungById(id).guarantee !== null);
  const rows = arms.map((id) => {
    const covs = s.runs.filter((r) => r.row.rung === id && r.coverage !== null).map((r) => r.coverage!);
    const n = covs.reduce((a, c) => a + c.numAdmittedFinished, 0);
    const v = covs.reduce((a, c) => a + c.numViolations, 0);
    const bound = covs.reduce((a, c) => a + c.sumBoundMs, 0);
    const actual = covs.reduce((a, c) => a + c.sumActualMs, 0);
    return [rungById(id).label, `${Math.round((rungById(id).guarantee ?? NaN) * 100)}%`, n === 0 ? '-' : `${((1 - v / n) * 100).toFixed(1)}%`, String(n), String(v), n === 0 ? '-' : (bound / n / 1000).toFixed(2), n === 0 ? '-' : (actual / n / 1000).toFixed(2)];
  });
  return {
    id: 'coverage',
    title: 'Online coverage of the admission bound',
    headers: ['Arm', 'Nominal', 'Empirical', 'admitted & finished', 'violations', 'mean bound (s)', 'mean actual (s)'],
    rows,
    notes: [
      arms.length === 0
        ? 'No rung 5 in this study: nothing to cover.'
        : 'From the admission traces the servers wrote while deciding (--trace-out), every load and seed pooled, warm-up included. Not the held-out check of the fit: the controller changes which requests run, so the finite-sample guarantee does not apply here; this is what the deployment kept.',
    ],
  };
}

interface Metric {
  readonly name: string;
  readonly f: (r: StudyRun) => number;
  /** +1: higher is better; -1: lower is better. */
  readonly better: 1 | -1;
  /** 'relative': worse by > 5% of the old value; 'points': a share worse by > 5 percentage points. */
  readonly kind: 'relative' | 'points';
}

const METRICS: readonly Metric[] = [
  { name: 'goodput', f: (r) => r.summary.request_goodput, better: 1, kind: 'relative' },
  { name: 'throughput', f: (r) => r.summary.request_throughput, better: 1, kind: 'relative' },
  { name: 'p50 TTFT', f: (r) => r.summary.median_ttft_ms, better: -1, kind: 'relative' },
  { name: 'p99 TTFT', f: (r) => r.summary.p99_ttft_ms, better: -1, kind: 'relative' },
  { name: 'p50 E2E', f: (r) => r.summary.median_e2el_ms, better: -1, kind: 'relative' },
  { name: 'p99 E2E', f: (r) => r.summary.p99_e2el_ms, better: -1, kind: 'relative' },
  { name: 'refused share', f: (r) => r.summary.shed_rate, better: -1, kind: 'points' },
  { name: 'SLO attainment', f: (r) => r.summary.slo_attainment, better: 1, kind: 'points' },
];

export const WORSE_THRESHOLD = 0.05;

/** How much worse `next` is than `prev` in the metric's own terms (> 0: worse), or NaN. */
export function worsening(m: Metric, prev: number, next: number): number {
  if (Number.isNaN(prev) || Number.isNaN(next)) return NaN;
  if (prev === next) return 0;
  if (m.kind === 'points') return (prev - next) * m.better;
  if (!Number.isFinite(prev) || !Number.isFinite(next)) return (next > prev ? 1 : -1) * -m.better * Infinity;
  if (prev === 0) return (next - prev) * -m.better > 0 ? Infinity : -Infinity;
  return ((next - prev) / Math.abs(prev)) * -m.better;
}

/** Each rung is compared with the one before it; every rung-5 arm with the last rung without admission. */
export function transitions(rungs: readonly string[]): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  let lastPlain: string | null = null;
  for (const id of rungs) {
    if (lastPlain !== null) out.push([lastPlain, id]);
    if (rungById(id).guarantee === null) lastPlain = id;
  }
  return out;
}

export function worseTable(s: Study): Table {
  const rows: string[][] = [];
  const clean: string[] = [];
  for (const [a, b] of transitions(studyRungs(s))) {
    let any = false;
    for (const m of METRICS) {
      const hits: Array<{ rate: number; w: number }> = [];
      for (const rate of s.rates) {
        const w = worsening(m, pointAgg(s, a, rate, m.f).mean, pointAgg(s, b, rate, m.f).mean);
        if (w > WORSE_THRESHOLD) hits.push({ rate, w });
      }
      if (hits.length === 0) continue;
      any = true;
      const worst = hits.reduce((x, y) => (y.w > x.w ? y : x));
      const how = m.kind === 'points' ? `${fmtNum(worst.w * 100, 0)} points` : worst.w === Infinity ? 'from zero or to >timeout' : `${fmtNum(worst.w * 100, 0)}%`;
      rows.push([`${rungById(a).label} → ${rungById(b).label}`, m.name, `${hits.length} of ${s.rates.length}`, hits.map((h) => h.rate).join(', '), `${how} at ${worst.rate} req/s`]);
    }
    if (!any) clean.push(`${a} → ${b}`);
  }
  return {
    id: 'worse',
    title: 'Everything that got worse',
    headers: ['Transition', 'Metric', 'Loads where worse', 'at (req/s)', 'Worst'],
    rows,
    notes: [
      `Every rung transition and metric where the seed-mean got more than ${WORSE_THRESHOLD * 100}% worse (shares: more than ${WORSE_THRESHOLD * 100} percentage points) at some offered load, with the number of loads where it did. Each rung-5 arm is compared with the last rung without admission.${clean.length === 0 ? '' : ` No metric got worse in: ${clean.join('; ')}.`}`,
      requestsNote(s),
    ],
  };
}

export function probeTable(s: Study): Table {
  const rungs = studyRungs(s);
  const probes = (rs: readonly StudyRun[]): number[] => rs.map((r) => r.row.probe_ms ?? NaN);
  const rows = rungs.map((id) => {
    const rs = s.runs.filter((r) => r.row.rung === id);
    return [rungById(id).label, String(rs.length), fmtAgg(agg(probes(rs)), 1)];
  });
  const all = agg(probes(s.runs));
  rows.push(['all runs', String(s.runs.length), fmtAgg(all, 1)]);
  const means = rungs.map((id) => agg(probes(s.runs.filter((r) => r.row.rung === id))).mean).filter((v) => Number.isFinite(v));
  const spread = (lo: number, hi: number): string => (lo > 0 ? `${((hi / lo - 1) * 100).toFixed(1)}%` : '-');
  return {
    id: 'probe',
    title: 'The probe: a fixed greedy generation on the idle server before every run (ms)',
    headers: ['Config', 'runs', 'probe ms, mean [min–max]'],
    rows,
    notes: [
      `The machine's speed varied ${spread(all.min, all.max)} across the sweep (slowest probe over fastest) and ${means.length > 1 ? spread(Math.min(...means), Math.max(...means)) : '-'} between rung means. The probe runs on each rung's own fresh server, so part of a difference between rungs is the rung's fixed cost, not the machine.`,
    ],
  };
}

/** The anchor rung's two runs per block, seed-mean per load: what a later position in the block cost. */
export function driftTable(s: Study): Table {
  const rows: string[][] = [];
  const diffs: number[] = [];
  const pct = (a: number, b: number): number => (a > 0 && Number.isFinite(a) && Number.isFinite(b) ? (b / a - 1) * 100 : NaN);
  for (const rate of s.rates) {
    const rep = (k: number, f: (r: StudyRun) => number): number => agg(s.runs.filter((r) => r.row.rung === ANCHOR_RUNG_ID && r.row.rate === rate && r.row.rep === k).map(f)).mean;
    const g1 = rep(1, (r) => r.summary.request_goodput);
    const g2 = rep(2, (r) => r.summary.request_goodput);
    if (Number.isNaN(g2)) continue;
    const e1 = rep(1, (r) => r.summary.p99_e2el_ms / 1000);
    const e2 = rep(2, (r) => r.summary.p99_e2el_ms / 1000);
    const p1 = rep(1, (r) => r.row.probe_ms ?? NaN);
    const p2 = rep(2, (r) => r.row.probe_ms ?? NaN);
    if (Number.isFinite(pct(g1, g2))) diffs.push(Math.abs(pct(g1, g2)));
    rows.push([String(rate), fmtNum(g1, 2), fmtNum(g2, 2), fmtNum(pct(g1, g2), 1), fmtNum(e1, 1), fmtNum(e2, 1), fmtNum(pct(e1, e2), 1), fmtNum(pct(p1, p2), 1)]);
  }
  return {
    id: 'drift',
    title: `Cross-block drift: the anchor rung (${rungById(ANCHOR_RUNG_ID).label}) run twice per block`,
    headers: ['offered (req/s)', 'goodput, 1st', 'goodput, 2nd', 'Δ goodput %', 'p99 E2E 1st (s)', 'p99 E2E 2nd (s)', 'Δ p99 %', 'Δ probe %'],
    rows,
    notes: [
      rows.length === 0
        ? 'The anchor rung is not in this study: no drift measurement.'
        : `Mean over seeds. The second run is always last in its block, the first wherever the rotation put it; mean |Δ goodput| is ${diffs.length === 0 ? '-' : `${(diffs.reduce((a, b) => a + b, 0) / diffs.length).toFixed(1)}%`}: a difference between rungs smaller than that is not a difference this sweep can see.`,
      requestsNote(s),
    ],
  };
}
