// The markdown table of docs/per-token.md §19 from a mixed-cost.ts run's JSON.
//
//   node --import tsx bench/native/mixed-cost-table.ts results/per-token/mixed-cost/mixed-cost.json
import { readFileSync } from 'node:fs';

interface Cell {
  layout: string;
  decoderContext: number;
  pos: number;
  chunk: number;
  stepMs: { median: number };
}
const file = process.argv[2];
if (file === undefined) throw new Error('usage: mixed-cost-table.ts <mixed-cost.json>');
const { cells } = JSON.parse(readFileSync(file, 'utf8')) as { cells: Cell[] };
const median = (layout: string, c: Cell): number => cells.find((x) => x.layout === layout && x.decoderContext === c.decoderContext && x.pos === c.pos && x.chunk === c.chunk)!.stepMs.median;
const n = (x: number): string => x.toLocaleString('en-US');
console.log("| decoder's context | chunk at position | rows | chunk alone | batched together | split | split / together |");
console.log('|---|---|---|---|---|---|---|');
for (const c of cells.filter((x) => x.layout === 'alone')) {
  const [a, f, s] = [median('alone', c), median('first', c), median('split', c)];
  console.log(`| ${n(c.decoderContext)} | ${n(c.pos)} | ${c.chunk} | ${a.toFixed(0)} ms | ${f.toFixed(0)} (${(f / a).toFixed(2)}x) | ${s.toFixed(0)} (${(s / a).toFixed(2)}x) | ${(s / f).toFixed(2)} |`);
}
