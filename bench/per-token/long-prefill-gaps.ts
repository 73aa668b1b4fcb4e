// Benchmark analysis (not a test): where a stream's largest gaps come from while a long prompt
// prefills, read from the server's flight recording (long-prefill.sh with RECORD=1).
//
// For every long prompt (a request whose prompt has at least --min-prompt tokens) and every other
// request decoding while it prefilled, the stream's gaps between consecutive tokens as the engine
// produced them: each gap is the steps that carried the stream's token (their compute and the rest
// of the step: scheduling, sampling, emitting) plus the time between steps (the event loop's other
// work, the OS). The largest gaps are listed with their parts and the prompt rows in the step, so a
// spike reads as a step the chunk model mis-sized or as time outside any step.
//
//   node --import tsx bench/per-token/long-prefill-gaps.ts <recording-dir> [--min-prompt 4000] [--top 5]
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

interface Step {
  s: number;
  e: number;
  c: number | null;
  r: [string, number, number, 0 | 1][];
}
interface Submit {
  id: string;
  p: number;
  tpot?: number;
}

const args = process.argv.slice(2);
const opt = (name: string, dflt: string): string => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1]! : dflt;
};
const root = args[0];
if (root === undefined) {
  console.error('usage: long-prefill-gaps.ts <recording-dir> [--min-prompt 4000] [--top 5]');
  process.exit(2);
}
const minPrompt = Number(opt('--min-prompt', '4000'));
const top = Number(opt('--top', '5'));

/** Every *.jsonl under dir (a --record directory holds one folder per run). */
function files(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir).sort()) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...files(p));
    else if (name.endsWith('.jsonl')) out.push(p);
  }
  return out;
}

const steps: Step[] = [];
const submits = new Map<string, Submit>();
for (const f of files(root)) {
  for (const line of readFileSync(f, 'utf8').split('\n')) {
    if (line === '') continue;
    const rec = JSON.parse(line) as { t: string } & Step & Submit;
    if (rec.t === 'step') steps.push(rec);
    else if (rec.t === 'submit') submits.set(rec.id, rec);
  }
}
steps.sort((a, b) => a.s - b.s);
const r1 = (x: number): number => Math.round(x * 10) / 10;
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1] ?? NaN;

for (const long of [...submits.values()].filter((s) => s.p >= minPrompt)) {
  const mine = steps.filter((st) => st.r.some((row) => row[0] === long.id));
  if (mine.length === 0) continue;
  const from = mine[0]!.s;
  const to = mine[mine.length - 1]!.e;
  // Streams: requests sampling a decode row (one token past their prompt) inside the window.
  const streams = new Set<string>();
  for (const st of steps) if (st.s >= from && st.e <= to) for (const [id, n, , smp] of st.r) if (id !== long.id && n === 1 && smp === 1) streams.add(id);
  for (const id of streams) {
    const carrying = steps.filter((st) => st.s >= from && st.e <= to && st.r.some((row) => row[0] === id && row[3] === 1));
    const gaps: { ms: number; stepMs: number; computeMs: number; betweenMs: number; promptRows: number }[] = [];
    for (let i = 1; i < carrying.length; i++) {
      const prev = carrying[i - 1]!;
      const cur = carrying[i]!;
      const promptRows = cur.r.filter((row) => row[0] !== id).reduce((a, row) => a + row[1], 0);
      gaps.push({ ms: cur.e - prev.e, stepMs: cur.e - cur.s, computeMs: cur.c ?? NaN, betweenMs: cur.s - prev.e, promptRows });
    }
    const all = gaps.map((g) => g.ms);
    console.log(
      `long ${long.id} (${long.p} tokens, prefill ${r1(to - from)} ms), stream ${id}${submits.get(id)?.tpot === undefined ? '' : ` (tpot ${submits.get(id)!.tpot} ms)`}: ` +
        `${gaps.length} gaps, median ${r1(median(all))} ms, max ${r1(Math.max(...all))} ms; step median ${r1(median(gaps.map((g) => g.stepMs)))} ms, between steps median ${r1(median(gaps.map((g) => g.betweenMs)))} ms`,
    );
    for (const g of [...gaps].sort((a, b) => b.ms - a.ms).slice(0, top)) {
      console.log(`  gap ${r1(g.ms)} ms = step ${r1(g.stepMs)} (compute ${r1(g.computeMs)}, ${g.promptRows} prompt rows) + between ${r1(g.betweenMs)}`);
    }
  }
}
