// Benchmark (not a test): what a decoding row costs a prompt chunk that shares its step, as a
// function of the decoder's own context, and whether the rows' order or a separate call changes it.
//
// llama.cpp's CPU flash attention runs batches of 64 rows or more through a tiled kernel: 64
// consecutive query rows (per head) against 64 KV cells at a time, a KV tile skipped only when the
// mask hides it from every row of the query tile. A decoding row in the same query tile as prompt
// rows makes that tile walk the decoder's whole context too. Per step, sequence 0 decodes one token
// at context D while sequence 1 takes a chunk of N prompt tokens at position P, laid out as:
//   first  the decode row, then the chunk (the order Headroom's scheduler planned);
//   last   the chunk, then the decode row;
//   split  the decode row in a call of its own, then the chunk (the two calls' times summed: what
//          the llama runner does since, src/engine/runner/llama/step-layout.ts);
//   alone  the chunk alone (no decoding row: the floor).
// Repeats are interleaved across layouts so machine noise hits all alike.
//
//   node --import tsx bench/native/mixed-cost.ts [model.gguf] [--threads 2] [--reps 5]
//        [--positions 0,1024,2048] [--chunks 64,256] [--contexts 128,2048,4096] [--json out.json]
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
const positions = list('--positions', '0,1024,2048');
const chunks = list('--chunks', '64,256');
const contexts = list('--contexts', '128,2048,4096');
const jsonOut = opt('--json', '');
const LAYOUTS = ['first', 'last', 'split', 'alone'] as const;
type Layout = (typeof LAYOUTS)[number];

const maxChunk = Math.max(...chunks);
// Every layout below is laid out by hand: the runner must not cut a step itself.
const runner = chunkBenchRunner(modelPath, threads, maxChunk, { splitSteps: false });
const rand = tokenSource(runner.info.vocabSize, 99);
/** A step's execute time (a plan of KV ops alone computes nothing: 0). */
const exec = async (p: RunnerPlan): Promise<number> => (p.items.length === 0 ? (await runner.execute(p), 0) : (await step(runner, p)).executeMs);
const rm = (seq: number, p0 = 0): RunnerPlan['kvOps'][number] => ({ kind: 'remove', seqId: asSeqId(seq), p0, p1: -1 });
const prefill = prefiller(exec, rand);

interface Cell {
  layout: Layout;
  ctx: number;
  pos: number;
  chunk: number;
  ms: number[];
}
const cells: Cell[] = [];
for (const ctx of contexts) for (const pos of positions) for (const chunk of chunks) for (const layout of LAYOUTS) cells.push({ layout, ctx, pos, chunk, ms: [] });

for (let rep = 0; rep < reps; rep++) {
  for (const ctx of contexts) {
    // Sequence 0 decodes at context ctx (its position grows by one a step and is reset per context).
    await exec({ kvOps: [rm(0), rm(1)], items: [] });
    await prefill(0, ctx);
    let p0 = ctx;
    const dec = (): StepItem => benchItem(0, rand(1), p0++, true);
    for (const pos of positions) {
      await exec({ kvOps: [rm(1)], items: [] });
      if (pos > 0) await prefill(1, pos);
      for (const chunk of chunks) {
        const order = rep % 2 === 0 ? LAYOUTS : [...LAYOUTS].reverse();
        for (const layout of order) {
          const chunkItem = benchItem(1, rand(chunk), pos, true);
          const clear = [rm(1, pos)];
          let ms: number;
          if (layout === 'first') ms = await exec({ kvOps: clear, items: [dec(), chunkItem] });
          else if (layout === 'last') ms = await exec({ kvOps: clear, items: [chunkItem, dec()] });
          else if (layout === 'split') ms = (await exec({ kvOps: clear, items: [dec()] })) + (await exec({ kvOps: [], items: [chunkItem] }));
          else ms = await exec({ kvOps: clear, items: [chunkItem] });
          cells.find((c) => c.layout === layout && c.ctx === ctx && c.pos === pos && c.chunk === chunk)!.ms.push(ms);
        }
      }
    }
  }
  process.stderr.write(`rep ${rep + 1}/${reps}\n`);
}
await runner.close();

console.log('decoder ctx  position  chunk  layout   step ms (median, min–max)   / alone');
const out = cells.map((c) => {
  const s = spread(c.ms);
  const alone = spread(cells.find((a) => a.layout === 'alone' && a.ctx === c.ctx && a.pos === c.pos && a.chunk === c.chunk)!.ms).median;
  console.log(`${String(c.ctx).padStart(11)}  ${String(c.pos).padStart(8)}  ${String(c.chunk).padStart(5)}  ${c.layout.padEnd(6)}   ${s.median.toFixed(2).padStart(7)} (${s.min.toFixed(2)}–${s.max.toFixed(2)})   ${(s.median / alone).toFixed(2)}`);
  return { layout: c.layout, decoderContext: c.ctx, pos: c.pos, chunk: c.chunk, stepMs: s };
});
if (jsonOut !== '') writeFileSync(jsonOut, JSON.stringify({ modelPath, threads, reps, cells: out }, null, 2) + '\n');
