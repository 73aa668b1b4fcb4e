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
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { isRecording, readRecording } from '../../src/obs/recorder/reader.ts';
import type { StepLine, SubmitLine } from '../../src/obs/recorder/format.ts';

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

// A --record directory holds one run folder per server start (or is one).
const runs = (await isRecording(root)) ? [root] : (await readdir(root)).map((n) => join(root, n));
const steps: StepLine[] = [];
const submits = new Map<string, SubmitLine>();
for (const run of runs) {
  if (!(await isRecording(run))) continue;
  const rec = await readRecording(run);
  steps.push(...rec.steps);
  for (const sub of rec.submits) submits.set(sub.id, sub);
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
