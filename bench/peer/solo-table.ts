// The one-at-a-time comparison's table (bench/peer/solo.sh): per round, each request's TTFT and
// median ITL under Headroom against llama-server's for the same request (paired by request id),
// and, from Headroom's flight recording, where its time went: arrival to first step, prefill, and
// batch-1 decode steps (the whole step against llama_decode inside it, and the gap between steps).
//
//   node --import tsx bench/peer/solo-table.ts results/per-token/solo
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { readRecords } from '../../src/harness/store.ts';

const root = process.argv[2] ?? 'results/per-token/solo';
const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length === 0 ? NaN : s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};
const f = (x: number, d: number): string => x.toFixed(d);

interface Line {
  t: string;
  [k: string]: unknown;
}
interface Step extends Line {
  s: number;
  e: number;
  c: number | null;
  k: string;
  r: [string, number, number, number][];
}

console.log('| round | requests | TTFT p50 ms, Headroom / llama-server | paired TTFT ratio p50 | ITL p50 ms, Headroom / llama-server | paired ITL ratio p50 | arrival → first step p50 ms | prefill p50 ms | batch-1 decode step ms (llama_decode) | gap between decode steps ms |');
console.log('|---|---|---|---|---|---|---|---|---|---|');
for (const round of readdirSync(root).filter((d) => d.startsWith('round-')).sort()) {
  const h = await readRecords(join(root, round, 'headroom'));
  const l = await readRecords(join(root, round, 'llama-server'));
  const ttft: number[] = [];
  const itl: number[] = [];
  for (const r of h) {
    const m = l.find((x) => x.request_id === r.request_id);
    if (m === undefined || r.ttft_ms === null || m.ttft_ms === null || r.itl_ms.length === 0 || m.itl_ms.length === 0) continue;
    ttft.push(r.ttft_ms / m.ttft_ms);
    itl.push(median(r.itl_ms) / median(m.itl_ms));
  }
  const rec = join(root, round, 'recording');
  const run = readdirSync(rec)[0]!;
  const lines: Line[] = readdirSync(join(rec, run))
    .filter((x) => x.endsWith('.jsonl.gz'))
    .sort()
    .flatMap((x) => gunzipSync(readFileSync(join(rec, run, x))).toString('utf8').trim().split('\n').map((s) => JSON.parse(s) as Line));
  const steps = lines.filter((x): x is Step => x.t === 'step');
  const done = lines.filter((x) => x.t === 'done') as unknown as { arr: number; sch: number; ft: number }[];
  const decode = steps.filter((s) => s.k === 'decode' && s.r.length === 1);
  const gaps: number[] = [];
  for (let i = 1; i < steps.length; i++) if (steps[i]!.k === 'decode' && steps[i - 1]!.k === 'decode' && steps[i]!.r.length === 1) gaps.push(steps[i]!.s - steps[i - 1]!.e);
  const ok = (rs: typeof h) => rs.filter((r) => r.ttft_ms !== null);
  console.log(
    `| ${round.slice(6)} | ${ttft.length} | ${f(median(ok(h).map((r) => r.ttft_ms!)), 0)} / ${f(median(ok(l).map((r) => r.ttft_ms!)), 0)} | ${f(median(ttft), 2)} | ` +
      `${f(median(h.flatMap((r) => r.itl_ms)), 2)} / ${f(median(l.flatMap((r) => r.itl_ms)), 2)} | ${f(median(itl), 2)} | ` +
      `${f(median(done.map((d) => d.sch - d.arr)), 2)} | ${f(median(done.map((d) => d.ft - d.sch)), 0)} | ` +
      `${f(median(decode.map((s) => s.e - s.s)), 2)} (${f(median(decode.map((s) => s.c ?? NaN)), 2)}) | ${f(median(gaps), 3)} |`,
  );
}
