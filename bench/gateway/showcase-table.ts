// The gateway admission showcase's tables, from the runs' summary.json files (bench/gateway/showcase.sh):
// llama-server alone over the saturation grid, then per seed the three arms of the showcase, and the
// two ratios the target is stated in: the gateway's goodput at OVER_RATE over llama-server's own peak
// goodput (measured in the same seed's block), and the gateway's p99 E2E of admitted requests against
// the SLO. A timed-out request counts as +∞ in a p99 (JSON null in summary.json).
//
//   node --import tsx bench/gateway/showcase-table.ts results/gateway/showcase

import { existsSync, readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';

interface Summary {
  slo_ms: number;
  offered_rate: number;
  num_arrivals: number;
  completed: number;
  num_shed: number;
  num_timeouts: number;
  request_throughput: number;
  request_goodput: number;
  slo_attainment_admitted: number | null;
  p99_e2el_ms: number | null;
  median_ttft_ms: number | null;
  generator_validation: { valid: boolean; slip_p99_ms: number };
}

const root = process.argv[2] ?? 'results/gateway/showcase';
const read = (dir: string): Summary | null => {
  const f = path.join(dir, 'summary.json');
  if (!existsSync(f)) return null;
  try {
    return JSON.parse(readFileSync(f, 'utf8')) as Summary;
  } catch {
    return null; // a run still being written
  }
};
const ms = (v: number | null): string => (v === null || !Number.isFinite(v) ? '∞' : String(Math.round(v)));
const f3 = (v: number | null): string => (v === null || !Number.isFinite(v) ? '—' : v.toFixed(3));
const pct = (v: number | null): string => (v === null || !Number.isFinite(v) ? '—' : `${(100 * v).toFixed(0)}%`);
const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 === 1 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};
const range = (xs: number[], fmt: (v: number) => string): string => `${fmt(median(xs))} [${fmt(Math.min(...xs))}, ${fmt(Math.max(...xs))}]`;
const load = (dir: string): string => {
  const f = path.join(dir, 'loadavg.txt');
  return existsSync(f) ? readFileSync(f, 'utf8').trim().split('\n').map((l) => l.split(' ')[1]).join('→') : '';
};

const row = (label: string, s: Summary, dir: string): string =>
  `| ${label} | ${s.offered_rate.toFixed(2)} | ${s.num_arrivals} | ${s.completed} | ${s.num_shed} | ${s.num_timeouts} | ${f3(s.request_throughput)} | **${f3(s.request_goodput)}** | ${pct(s.slo_attainment_admitted)} | ${ms(s.p99_e2el_ms)} | ${ms(s.median_ttft_ms)} | ${s.generator_validation.valid ? 'yes' : `no (slip p99 ${s.generator_validation.slip_p99_ms.toFixed(1)} ms)`} | ${load(dir)} |`;
const HEADER = '| run | offered/s | arrivals | completed | refused | timed out | throughput/s | **goodput/s** | SLO att. (admitted) | p99 E2E ms (admitted) | TTFT p50 ms | generator valid | load 1m |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|';

const out: string[] = [];
const sat = path.join(root, 'saturation');
if (existsSync(sat)) {
  out.push('## llama-server alone (saturation)', '', HEADER);
  const rates = readdirSync(sat).filter((d) => d.startsWith('rate-')).sort((a, b) => Number(a.slice(5)) - Number(b.slice(5)));
  for (const r of rates) {
    const s = read(path.join(sat, r));
    if (s !== null) out.push(row(`${r.slice(5)} req/s`, s, path.join(sat, r)));
  }
  out.push('');
}
const show = path.join(root, 'showcase');
if (existsSync(show)) {
  out.push('## The showcase', '', HEADER);
  const ratios: number[] = [];
  const p99s: number[] = [];
  const overGoodput: number[] = [];
  let slo = 0;
  for (const seed of readdirSync(show).filter((d) => d.startsWith('seed-')).sort()) {
    const arms = Object.fromEntries(['llama-peak', 'llama-over', 'gateway'].map((a) => [a, read(path.join(show, seed, a))]));
    for (const [a, s] of Object.entries(arms)) if (s !== null) out.push(row(`${seed} ${a}`, s, path.join(show, seed, a)));
    const peak = arms['llama-peak'];
    const gw = arms['gateway'];
    const over = arms['llama-over'];
    if (peak != null && gw != null) {
      slo = gw.slo_ms;
      ratios.push(gw.request_goodput / peak.request_goodput);
      p99s.push(gw.p99_e2el_ms ?? Infinity);
    }
    if (over != null) overGoodput.push(over.request_goodput);
  }
  out.push('');
  if (ratios.length > 0) {
    out.push(`Seeds: ${ratios.length}. Median [min, max] over seeds.`, '');
    out.push(`- Gateway goodput at the overload rate / llama-server's own peak goodput (same seed's block): **${range(ratios, (v) => v.toFixed(2))}** (target ≥ 0.80).`);
    out.push(`- Gateway p99 E2E of admitted requests: **${range(p99s, (v) => (Number.isFinite(v) ? `${Math.round(v)} ms` : '∞'))}** against the ${slo} ms SLO.`);
    if (overGoodput.length > 0) out.push(`- llama-server alone at the overload rate: goodput ${range(overGoodput, (v) => v.toFixed(3))}/s.`);
  }
}
process.stdout.write(`${out.join('\n')}\n`);
