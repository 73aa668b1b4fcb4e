// Benchmark (not a test): what one step costs as a function of its prompt chunk's size and of how
// far into the pool attention reaches: the data behind the step-time budget (src/engine/scheduler/
// step-cost.ts) and docs/per-token.md.
//
// Each step carries one decoding sequence (1 token) and a chunk of N prompt tokens of a second
// sequence at position P (its cells 0..P already computed). Two layouts:
//   own    the chunk's own prefix is the only thing in the pool (n_kv ≈ P + N);
//   far    another sequence also holds FILL cells, so every row attends over ≈ FILL + P + N cells
//          (kv_unified: other sequences' cells are masked, not skipped).
// Repeats are interleaved across configurations so machine noise hits all alike.
//
//   node --import tsx bench/native/chunk-cost.ts [model.gguf] [--threads 2] [--reps 5]
//        [--positions 0,1024,2048,4096,6144] [--chunks 16,64,256,512] [--fill 6144] [--json out.json]
import { writeFileSync } from 'node:fs';
import { asSeqId } from '../../src/engine/plan.ts';
import type { RunnerPlan, StepItem } from '../../src/engine/plan.ts';
import { benchArgs, benchItem, chunkBenchRunner, prefiller, step, tokenSource } from './lib.ts';
import { ensureDefaultModel } from '../../src/model/default-model.ts';
import { spread } from '../../src/engine/runner/llama/calibrate.ts';

const { opt, list, modelPath: given } = benchArgs(process.argv.slice(2));
const modelPath = given ?? (await ensureDefaultModel());
const threads = Number(opt('--threads', '2'));
const reps = Number(opt('--reps', '5'));
const positions = list('--positions', '0,1024,2048,4096,6144');
const chunks = list('--chunks', '16,64,256,512');
const fill = Number(opt('--fill', '6144'));
const jsonOut = opt('--json', '');

const maxChunk = Math.max(...chunks);
const runner = chunkBenchRunner(modelPath, threads, maxChunk);
const rand = tokenSource(runner.info.vocabSize, 99);
const exec = async (p: RunnerPlan): Promise<number> => (await step(runner, p)).executeMs;
const rm = (seq: number): RunnerPlan['kvOps'][number] => ({ kind: 'remove', seqId: asSeqId(seq), p0: 0, p1: -1 });
const prefill = prefiller(exec, rand);

interface Cell {
  layout: 'own' | 'far';
  pos: number;
  chunk: number;
  ms: number[];
}
const cells: Cell[] = [];
for (const layout of ['own', 'far'] as const) for (const pos of positions) for (const chunk of chunks) cells.push({ layout, pos, chunk, ms: [] });

// Sequence 0 decodes (a 128-token context, growing by one per step); sequence 1 takes the chunk; sequence 2 is the far filler.
await exec({ kvOps: [rm(0), rm(1), rm(2)], items: [benchItem(0, rand(128), 0, true)] });
let p0 = 128;
const dec = (): StepItem => benchItem(0, rand(1), p0++, true);
for (let rep = 0; rep < reps; rep++) {
  for (const layout of ['own', 'far'] as const) {
    await exec({ kvOps: [rm(2)], items: [dec()] });
    if (layout === 'far') await prefill(2, fill);
    for (const pos of positions) {
      await exec({ kvOps: [rm(1)], items: [dec()] });
      if (pos > 0) await prefill(1, pos);
      for (const chunk of chunks) {
        const ms = await exec({ kvOps: [{ kind: 'remove', seqId: asSeqId(1), p0: pos, p1: -1 }], items: [dec(), benchItem(1, rand(chunk), pos, true)] });
        cells.find((c) => c.layout === layout && c.pos === pos && c.chunk === chunk)!.ms.push(ms);
      }
    }
  }
  process.stderr.write(`rep ${rep + 1}/${reps}\n`);
}
await runner.close();

console.log('layout  position  chunk   step ms (median, min–max)   ms per chunk token');
const out = cells.map((c) => {
  const s = spread(c.ms);
  console.log(`${c.layout.padEnd(6)}  ${String(c.pos).padStart(8)}  ${String(c.chunk).padStart(5)}   ${s.median.toFixed(2).padStart(7)} (${s.min.toFixed(2)}–${s.max.toFixed(2)})   ${(s.median / c.chunk).toFixed(4)}`);
  return { layout: c.layout, pos: c.pos, chunk: c.chunk, fill: c.layout === 'far' ? fill : 0, stepMs: s };
});
if (jsonOut !== '') writeFileSync(jsonOut, JSON.stringify({ modelPath, threads, reps, cells: out }, null, 2) + '\n');
