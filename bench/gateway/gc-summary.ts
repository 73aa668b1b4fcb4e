// Summarises gc-preload.mjs's lines over the seconds in which the gateway served traffic (more than
// 50 ms of CPU in the second): GC pauses by kind (count, p50, max, total) and the event loop's delay.
//
//   node --import tsx bench/gateway/gc-summary.ts results/gateway/overhead-gc/*.jsonl
import { readFileSync } from 'node:fs';

interface Second {
  cpuMs: number;
  eld: { p50: number; p99: number; max: number };
  gc: [number, number][];
  heapMB: number;
}
const KINDS: Record<number, string> = { 1: 'scavenge', 2: 'minor mark-sweep', 4: 'mark-sweep-compact', 8: 'incremental marking', 16: 'weak callbacks' };
const q = (xs: readonly number[], p: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : s[Math.min(s.length - 1, Math.floor(p * s.length))]!;
};
console.log('| file | busy s | CPU ms/s p50 | heap MB min–max | event-loop delay p99 (median over s) | delay max (median over s) | GC kind: pauses/s, p50 ms, max ms |');
console.log('|---|---|---|---|---|---|---|');
for (const file of process.argv.slice(2)) {
  const busy = readFileSync(file, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Second).filter((s) => s.cpuMs > 50).slice(1); // the first busy second is start-up
  const byKind = new Map<number, number[]>();
  for (const [k, ms] of busy.flatMap((s) => s.gc)) byKind.set(k, [...(byKind.get(k) ?? []), ms]);
  const gc = [...byKind].sort((a, b) => a[0] - b[0]).map(([k, ds]) => `${KINDS[k] ?? k}: ${(ds.length / busy.length).toFixed(1)}, ${q(ds, 0.5).toFixed(2)}, ${Math.max(...ds).toFixed(2)}`);
  const heap = busy.map((s) => s.heapMB);
  console.log(`| ${file.split('/').pop()} | ${busy.length} | ${q(busy.map((s) => s.cpuMs), 0.5).toFixed(0)} | ${Math.min(...heap).toFixed(0)}–${Math.max(...heap).toFixed(0)} | ${q(busy.map((s) => s.eld.p99), 0.5).toFixed(2)} | ${q(busy.map((s) => s.eld.max), 0.5).toFixed(2)} | ${gc.join('; ')} |`);
}
