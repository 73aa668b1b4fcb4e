// The long-prompt comparison's table (bench/peer/long.sh): per rate and system, the median over
// seeds of TTFT p50, ITL p50, E2E p50 and p99 and goodput at the SLO, with the range over seeds;
// then each Headroom configuration / llama-server, paired by seed (median and range). A replica
// (`<config>+<tag>` in long.sh: the same configuration run again in the same rotation) is also paired
// with its original: that ratio is what the comparison reads for two identical systems, its noise
// floor. Reads each run's summary.json (written by `headroom bench run --json`, computed with the
// SLO given there). Last, per pair, the same requests matched by id (steady phase, answered by both):
// the median of the per-request TTFT and ITL ratios, per seed — steadier than a ratio of medians
// when, as here, TTFT is bimodal (shared and unique documents).
//
//   node --import tsx bench/peer/long-table.ts results/per-token/peer-long
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { readRecords } from '../../src/harness/store.ts';
import type { RequestRecord } from '../../src/harness/record.ts';

const root = process.argv[2] ?? 'results/per-token/peer-long';
const KNOWN = ['headroom', 'headroom-host', 'headroom-host-lean', 'headroom-host-keep', 'headroom-host-pin', 'headroom-host-onecall', 'headroom-admit', 'headroom-admit-keep', 'headroom-overlap', 'headroom-lean', 'headroom-chunk', 'headroom-inline', 'headroom-pool', 'headroom-budget', 'llama-server'];
type Metric = 'median_ttft_ms' | 'median_itl_ms' | 'median_e2el_ms' | 'p99_e2el_ms' | 'request_goodput' | 'request_throughput';
const metrics: { key: Metric; label: string; digits: number }[] = [
  { key: 'median_ttft_ms', label: 'TTFT p50 ms', digits: 0 },
  { key: 'median_itl_ms', label: 'ITL p50 ms', digits: 2 },
  { key: 'median_e2el_ms', label: 'E2E p50 ms', digits: 0 },
  { key: 'p99_e2el_ms', label: 'E2E p99 ms', digits: 0 },
  { key: 'request_throughput', label: 'completed/s', digits: 3 },
  { key: 'request_goodput', label: 'goodput/s', digits: 3 },
];

const seeds = readdirSync(root).filter((d) => d.startsWith('seed-')).sort();
const rates = [...new Set(seeds.flatMap((s) => readdirSync(join(root, s)).filter((d) => d.startsWith('rate-'))))].sort((a, b) => Number(a.slice(5)) - Number(b.slice(5)));
const present = (sys: string): boolean => seeds.some((s) => rates.some((r) => existsSync(join(root, s, r, sys, 'summary.json'))));
const dirs = new Set(seeds.flatMap((s) => rates.flatMap((r) => (existsSync(join(root, s, r)) ? readdirSync(join(root, s, r)) : []))));
const replicasOf = (sys: string): string[] => [...dirs].filter((d) => d.startsWith(`${sys}+`)).sort();
const systems = KNOWN.flatMap((sys) => [sys, ...replicasOf(sys)]).filter(present);
const read = (seed: string, rate: string, sys: string): Record<string, number | string> | null => {
  const f = join(root, seed, rate, sys, 'summary.json');
  return existsSync(f) ? (JSON.parse(readFileSync(f, 'utf8')) as Record<string, number | string>) : null;
};
const num = (v: number | string | undefined): number => (v === 'Infinity' ? Infinity : typeof v === 'number' ? v : NaN);
const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};
const fmt = (x: number, d: number): string => (Number.isFinite(x) ? x.toFixed(d) : x > 0 ? '∞' : '—');
const cell = (xs: number[], d: number): string => (xs.length === 0 ? '—' : `${fmt(median(xs), d)} (${fmt(Math.min(...xs), d)}–${fmt(Math.max(...xs), d)})`);

console.log(`Seeds: ${seeds.map((s) => s.slice(5)).join(', ')}. Median over seeds (range).\n`);
console.log(`| rate | system | ${metrics.map((m) => m.label).join(' | ')} |`);
console.log(`|---|---|${metrics.map(() => '---').join('|')}|`);
for (const rate of rates) {
  for (const sys of systems) {
    const runs = seeds.map((s) => read(s, rate, sys)).filter((r) => r !== null);
    console.log(`| ${rate.slice(5)} | ${sys} | ${metrics.map((m) => cell(runs.map((r) => num(r[m.key])), m.digits)).join(' | ')} |`);
  }
}
function pairTable(mine: string, base: string): void {
  console.log(`\n${mine} / ${base}, paired by seed: median (range).\n`);
  console.log(`| rate | ${metrics.map((m) => m.label).join(' | ')} |`);
  console.log(`|---|${metrics.map(() => '---').join('|')}|`);
  for (const rate of rates) {
    const cells = metrics.map((m) => {
      const rs: number[] = [];
      for (const s of seeds) {
        const h = read(s, rate, mine);
        const l = read(s, rate, base);
        if (h === null || l === null) continue;
        const a = num(h[m.key]);
        const b = num(l[m.key]);
        if (Number.isFinite(a) && Number.isFinite(b) && b > 0) rs.push(a / b);
      }
      return cell(rs, 2);
    });
    console.log(`| ${rate.slice(5)} | ${cells.join(' | ')} |`);
  }
}
for (const mine of systems.filter((x) => x !== 'llama-server')) pairTable(mine, 'llama-server');
for (const mine of systems.filter((x) => x.includes('+') && !x.startsWith('llama-server+'))) pairTable(mine, mine.slice(0, mine.indexOf('+')));
const peak = (sys: string): number[] => seeds.map((s) => Math.max(...rates.map((r) => num(read(s, r, sys)?.['request_goodput']) || 0)));
const pl = peak('llama-server');
for (const mine of systems.filter((x) => x !== 'llama-server')) {
  const ph = peak(mine);
  console.log(`\nPeak goodput over rates, per seed: ${mine} ${ph.map((x) => x.toFixed(3)).join(', ')}; llama-server ${pl.map((x) => x.toFixed(3)).join(', ')}; ratio ${ph.map((x, i) => (pl[i]! > 0 ? (x / pl[i]!).toFixed(2) : '∞')).join(', ')}.`);
}

/** Per seed: the median over requests answered by both of mine's TTFT / base's, and of their median ITLs. */
async function perRequest(mine: string, base: string): Promise<void> {
  console.log(`\n${mine} / ${base}, request by request (median of per-request ratios), per seed:\n`);
  console.log('| rate | seed | requests | TTFT | ITL | TTFT, shared document | TTFT, unique prompt | TTFT, arrived alone | TTFT, arrived beside another |');
  console.log('|---|---|---|---|---|---|---|---|---|');
  for (const rate of rates) {
    for (const seed of seeds) {
      const dirA = join(root, seed, rate, mine);
      const dirB = join(root, seed, rate, base);
      if (!existsSync(join(dirA, 'records.parquet')) || !existsSync(join(dirB, 'records.parquet'))) continue;
      const ok = (r: RequestRecord): boolean => r.phase === 'steady' && r.http_status === 200 && r.ttft_ms !== null;
      const baseRows = await readRecords(dirB);
      const b = new Map(baseRows.filter(ok).map((r) => [r.request_id, r]));
      // Whether a request arrived while another was in flight, on the base run's timeline (so both
      // systems' requests fall in the same class): another row intended earlier and ended later.
      const beside = (r: RequestRecord): boolean => baseRows.some((o) => o.request_id !== r.request_id && o.intended_ms < r.intended_ms && o.end_ms > r.intended_ms);
      const ttft: number[] = [];
      const itl: number[] = [];
      const byClass = new Map<string, number[]>();
      for (const r of (await readRecords(dirA)).filter(ok)) {
        const o = b.get(r.request_id);
        if (o === undefined) continue;
        ttft.push(r.ttft_ms! / o.ttft_ms!);
        byClass.set(r.klass, [...(byClass.get(r.klass) ?? []), r.ttft_ms! / o.ttft_ms!]);
        const when = beside(o) ? 'beside' : 'alone';
        byClass.set(when, [...(byClass.get(when) ?? []), r.ttft_ms! / o.ttft_ms!]);
        if (r.itl_ms.length > 0 && o.itl_ms.length > 0) itl.push(median(r.itl_ms) / median(o.itl_ms));
      }
      const cls = (k: string): string => {
        const xs = byClass.get(k) ?? [];
        return xs.length > 0 ? `${median(xs).toFixed(2)} (${xs.length})` : '—';
      };
      console.log(`| ${rate.slice(5)} | ${seed.slice(5)} | ${ttft.length} | ${ttft.length > 0 ? median(ttft).toFixed(2) : '—'} | ${itl.length > 0 ? median(itl).toFixed(2) : '—'} | ${cls('shared')} | ${cls('unique')} | ${cls('alone')} | ${cls('beside')} |`);
    }
  }
}
for (const mine of systems.filter((x) => x !== 'llama-server')) await perRequest(mine, 'llama-server');
for (const mine of systems.filter((x) => x.includes('+') && !x.startsWith('llama-server+'))) await perRequest(mine, mine.slice(0, mine.indexOf('+')));
