// The admission sweep's table, regenerated from the committed run folders (summary.json from the
// harness, trace.jsonl and stats.json from the server): per rate and arm, goodput at the SLO, p99
// E2E of what was served, the refusal rate, the SLO attainment of what was admitted, online
// coverage (admitted requests inside the bound they were admitted on), how many the under-capacity
// shortcut admitted, and the admitted count per 10 s window of the run (to see oscillation).
// With several seeds (seed-<s>/ folders) each cell is the median over seeds with its [min, max],
// and the goodput ratio to the `off` arm is computed per seed before taking the median.
//
//   node --import tsx bench/admission/table.ts results/admission/sweep
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { wilson } from '../../src/admission/evaluate.ts';

interface Summary {
  slo_ms: number;
  offered_rate: number;
  request_goodput: number;
  request_throughput: number;
  p99_e2el_ms?: number;
  shed_rate: number;
  slo_attainment_admitted: number;
  num_arrivals: number;
  num_timeouts: number;
}

interface Run {
  readonly seed: string;
  readonly s: Summary;
  /** Admitted choice-0 rows inside their bound / with an outcome that can tell. */
  readonly coverage: number;
  /** The rows behind `coverage`: covered of n. */
  readonly covered: number;
  readonly n: number;
  readonly headroom: number;
  /** The upper edge of the decision-time histogram bucket holding its p99, µs (NaN: no metrics.txt). */
  readonly decisionP99Us: number;
  readonly windows: string;
}

const root = process.argv[2] ?? 'results/admission/sweep';
const seedDirs = readdirSync(root).filter((d) => d.startsWith('seed-')).sort();
const layouts = seedDirs.length > 0 ? seedDirs.map((d) => ({ seed: d.slice(5), dir: join(root, d) })) : [{ seed: '', dir: root }];

/** runs[rate][arm] = one Run per seed. */
const runs = new Map<string, Map<string, Run[]>>();
const offBySeed = new Map<string, number>();
/** The arms that admit everything: Headroom with --admission off, and llama.cpp's llama-server. */
const UNMANAGED = new Set(['off', 'llama-server']);
/** The best goodput of any unmanaged arm over the rates, per seed: the peak a managed arm is held against. */
const unmanagedPeak = new Map<string, number>();
for (const { seed, dir: seedDir } of layouts) {
  for (const rateDir of readdirSync(seedDir).filter((d) => d.startsWith('rate-'))) {
    for (const arm of readdirSync(join(seedDir, rateDir))) {
      const dir = join(seedDir, rateDir, arm);
      const summaryPath = join(dir, 'summary.json');
      const text = existsSync(summaryPath) ? readFileSync(summaryPath, 'utf8') : '';
      if (text.trim() === '') continue; // a run that did not finish
      const s = JSON.parse(text) as Summary;
      const rate = rateDir.slice(5);
      if (arm === 'off') offBySeed.set(`${seed}/${rate}`, s.request_goodput);
      if (UNMANAGED.has(arm)) unmanagedPeak.set(seed, Math.max(unmanagedPeak.get(seed) ?? 0, s.request_goodput));
      const byArm = runs.get(rate) ?? new Map<string, Run[]>();
      runs.set(rate, byArm);
      const list = byArm.get(arm) ?? [];
      byArm.set(arm, list);
      list.push({ seed, s, ...traceFacts(join(dir, 'trace.jsonl')), headroom: headroomCount(join(dir, 'stats.json')), decisionP99Us: decisionP99(join(dir, 'metrics.txt')) });
    }
  }
}

const f2 = (x: number): string => (Number.isNaN(x) ? '-' : x.toFixed(2));
const pct = (x: number): string => (Number.isNaN(x) ? '-' : `${(100 * x).toFixed(0)}%`);
const sec = (x: number): string => (Number.isNaN(x) ? '-' : Number.isFinite(x) ? (x / 1000).toFixed(1) : '∞');
const median = (xs: number[]): number => {
  const v = xs.filter((x) => !Number.isNaN(x)).sort((a, b) => a - b);
  if (v.length === 0) return NaN;
  return v.length % 2 === 1 ? v[v.length >> 1]! : (v[v.length / 2 - 1]! + v[v.length / 2]!) / 2;
};
const cell = (xs: number[], fmt: (x: number) => string): string => {
  const v = xs.filter((x) => !Number.isNaN(x));
  if (v.length <= 1) return fmt(v[0] ?? NaN);
  return `${fmt(median(v))} [${fmt(Math.min(...v))}, ${fmt(Math.max(...v))}]`;
};

const ratioFmt = (x: number): string => (Number.isFinite(x) ? x.toFixed(2) : Number.isNaN(x) ? '-' : '∞');

/** k of n with its Wilson 95% interval, as "p% [lo, hi] of n". */
const withInterval = (k: number, n: number): string => {
  if (n === 0) return '-';
  const [lo, hi] = wilson(k, n);
  return `${((100 * k) / n).toFixed(1)}% [${(100 * lo).toFixed(1)}, ${(100 * hi).toFixed(1)}] of ${n}`;
};
const sum = (xs: number[]): number => xs.reduce((a, b) => a + b, 0);

const rows: string[] = [];
for (const rate of [...runs.keys()].sort((a, b) => Number(a) - Number(b))) {
  const byArm = runs.get(rate)!;
  for (const arm of [...byArm.keys()].sort()) {
    const rs = byArm.get(arm)!;
    const ratio = rs.map((r) => r.s.request_goodput / (offBySeed.get(`${r.seed}/${rate}`) ?? NaN));
    const ratioPeak = rs.map((r) => r.s.request_goodput / (unmanagedPeak.get(r.seed) ?? NaN));
    rows.push(
      `| ${rate} | ${arm} | ${rs.length} | ${cell(rs.map((r) => r.s.offered_rate), f2)} | ${cell(rs.map((r) => r.s.request_goodput), f2)} | ${cell(ratio, ratioFmt)} | ${cell(ratioPeak, ratioFmt)} | ${cell(rs.map((r) => r.s.p99_e2el_ms ?? NaN), sec)} | ${cell(rs.map((r) => r.s.shed_rate), pct)} | ${cell(rs.map((r) => r.s.slo_attainment_admitted), pct)} | ${cell(rs.map((r) => r.coverage), pct)} | ${withInterval(sum(rs.map((r) => r.covered)), sum(rs.map((r) => r.n)))} | ${cell(rs.map((r) => r.decisionP99Us), (x) => (Number.isNaN(x) ? '-' : `≤ ${x.toFixed(0)}`))} | ${cell(rs.map((r) => r.headroom), (x) => (Number.isNaN(x) ? '-' : x.toFixed(0)))} | ${rs.map((r) => r.s.num_timeouts).join(' ')} | ${rs.map((r) => r.windows).join(' / ')} |`,
    );
  }
}
process.stdout.write(`# Admission overload sweep

Generated by \`node --import tsx bench/admission/table.ts ${root}\` from the run folders beside this file
(command: \`bash bench/admission/sweep.sh\`; each run's meta.json records the configuration and machine).
${layouts.length > 1 ? `Seeds: ${layouts.map((l) => l.seed).join(', ')}; each cell is the median over seeds [min, max]; the goodput ratio to \`off\` is taken per seed.\n` : ''}
Columns: goodput is requests/s finished inside the SLO; "unmanaged peak" is the best goodput, over the rates, of the arms that
admit everything (\`off\`, and \`llama-server\` when it ran), per seed; p99 E2E is over served requests; "inside SLO" is the share of admitted
requests that finished inside their budget (the guarantee's subject); "inside bound" is online coverage, the share of admitted
requests whose latency was inside the bound they were admitted on (a request admitted with no bound, or by the under-capacity
shortcut past its bound, counts as covered only if it beat that bound); "pooled" is the same over every seed's rows together,
with its 95% Wilson interval; "decision p99" is the upper edge of the server's \`headroom_admission_decision_seconds\` histogram
bucket (1, 1.5, 2, 3, 5, 7 per decade since the decision-time change of sweep-decision; powers of two before) that holds the p99 of the decision time (snapshot, features and verdict), µs; "headroom" is how many the
shortcut admitted.

| rate (req/s) | arm | seeds | offered | goodput at SLO (req/s) | goodput / off here | goodput / unmanaged peak | p99 E2E served (s) | refused | admitted inside SLO | admitted inside bound | inside bound, pooled | decision p99 (µs) | headroom admits | client timeouts | admitted per 10 s window |
|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|
${rows.join('\n')}
${(() => {
  const d = pooledDecisionRows();
  return d.length === 0
    ? ''
    : `
Decision time over every run of an arm (the servers' histograms summed; bucket upper edges, µs):

| arm | decisions | p50 | p99 | p99.9 |
|---|---|---|---|---|
${d.join('\n')}
`;
})()}`);

/** From the server's trace (choice 0 rows): online coverage of the bound, and admitted per 10 s window "a b c …". */
function traceFacts(path: string): { coverage: number; covered: number; n: number; windows: string } {
  if (!existsSync(path)) return { coverage: NaN, covered: 0, n: 0, windows: '-' };
  const rows = readFileSync(path, 'utf8')
    .trim()
    .split('\n')
    .filter((l) => l.length > 0)
    .map((l) => JSON.parse(l) as { arrival_ms: number; admitted: boolean; choice: number; bound_ms: number | null; e2e_ms: number | null; censored: boolean });
  if (rows.length === 0) return { coverage: NaN, covered: 0, n: 0, windows: '-' };
  const t0 = Math.min(...rows.map((r) => r.arrival_ms));
  const bins: number[] = [];
  let n = 0;
  let covered = 0;
  for (const r of rows) {
    if (!r.admitted || r.choice !== 0) continue;
    const b = Math.floor((r.arrival_ms - t0) / 10_000);
    bins[b] = (bins[b] ?? 0) + 1;
    if (r.bound_ms === null || r.e2e_ms === null) continue;
    const inside = r.e2e_ms <= r.bound_ms;
    if (r.censored && inside) continue; // cut short before its bound: cannot tell
    n++;
    if (inside) covered++;
  }
  return { coverage: n === 0 ? NaN : covered / n, covered, n, windows: Array.from(bins, (x) => x ?? 0).join(' ') };
}

/** The decision-time histogram of a /metrics scrape: [upper edge in seconds, cumulative count] per bucket. */
function decisionBuckets(path: string): [number, number][] {
  if (!existsSync(path)) return [];
  const buckets: [number, number][] = [];
  for (const line of readFileSync(path, 'utf8').split('\n')) {
    const m = /^headroom_admission_decision_seconds_bucket\{le="([^"]+)"\} (\d+)/.exec(line);
    if (m !== null) buckets.push([m[1] === '+Inf' ? Infinity : Number(m[1]), Number(m[2])]);
  }
  return buckets;
}

/** The upper edge of the bucket holding quantile p of a cumulative histogram, µs (NaN: empty). */
function bucketQuantile(buckets: readonly [number, number][], p: number): number {
  const total = buckets.at(-1)?.[1] ?? 0;
  if (total === 0) return NaN;
  return buckets.find(([, c]) => c >= p * total)![0] * 1e6;
}

/** The p99 bucket's upper edge of the decision-time histogram in a /metrics scrape, µs. */
function decisionP99(path: string): number {
  return bucketQuantile(decisionBuckets(path), 0.99);
}

/** Every run's decision histogram summed, per arm: "arm | decisions | p50 | p99 | p99.9" rows. */
function pooledDecisionRows(): string[] {
  const byArm = new Map<string, [number, number][]>();
  for (const { dir: seedDir } of layouts) {
    for (const rateDir of readdirSync(seedDir).filter((d) => d.startsWith('rate-'))) {
      for (const arm of readdirSync(join(seedDir, rateDir))) {
        const b = decisionBuckets(join(seedDir, rateDir, arm, 'metrics.txt'));
        if (b.length === 0) continue;
        const acc = byArm.get(arm);
        if (acc === undefined) byArm.set(arm, b.map(([le, c]) => [le, c]));
        else b.forEach(([, c], i) => (acc[i]![1] += c));
      }
    }
  }
  const us = (x: number): string => (Number.isNaN(x) ? '-' : `≤ ${x.toFixed(0)}`);
  return [...byArm.keys()].sort().map((arm) => {
    const b = byArm.get(arm)!;
    return `| ${arm} | ${b.at(-1)![1]} | ${us(bucketQuantile(b, 0.5))} | ${us(bucketQuantile(b, 0.99))} | ${us(bucketQuantile(b, 0.999))} |`;
  });
}

/** Requests the under-capacity shortcut admitted, from the server's /stats at the end of the run. */
function headroomCount(path: string): number {
  if (!existsSync(path)) return NaN;
  const text = readFileSync(path, 'utf8');
  if (text.trim() === '') return NaN;
  const s = JSON.parse(text) as { admission?: { reasons?: Record<string, number> } };
  const reasons = s.admission?.reasons;
  if (reasons === undefined) return NaN;
  return (reasons['headroom'] ?? 0) + (reasons['headroom_probe'] ?? 0);
}
