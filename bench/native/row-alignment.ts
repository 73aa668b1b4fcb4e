// Benchmark (not a test): the cost of one prompt chunk of N rows at position P, for N around
// multiples of 64. llama.cpp's CPU attention runs a multiple of 64 rows much faster than one off it
// deep in a prompt, which is why the scheduler aligns a step's rows (batch-scheduler.ts ROW_ALIGN).
// Median of 5 interleaved repeats; llama_decode time (C++ side).
//
//   node --import tsx bench/native/row-alignment.ts POSITION N1 N2 ...   (model: models/tiny.gguf, 2 threads)
import { LlamaRunner } from '../../src/engine/runner/llama/llama-runner.ts';
import { asSeqId } from '../../src/engine/plan.ts';
import type { KvOp, RunnerPlan } from '../../src/engine/plan.ts';
import { benchItem, step, tokenSource } from './lib.ts';

const runner = new LlamaRunner({ modelPath: 'models/tiny.gguf', threads: 2, maxSequences: 4, maxBatchTokens: 2048, microBatchTokens: 512, contextTokens: 16384, contextBeyondTrained: true });
const rand = tokenSource(runner.info.vocabSize, 5);
const decodeMs = async (p: RunnerPlan): Promise<number> => (await step(runner, p)).decodeUs / 1000;

const pos = Number(process.argv[2] ?? 2048);
for (let at = 0; at < pos; at += 512) await decodeMs({ kvOps: [], items: [benchItem(1, rand(Math.min(512, pos - at)), at, true)] });
const cut: KvOp = { kind: 'remove', seqId: asSeqId(1), p0: pos, p1: -1 };
const sizes = process.argv.slice(3).map(Number);
const ms = new Map<number, number[]>(sizes.map((n) => [n, []]));
for (let r = 0; r < 5; r++) for (const n of sizes) ms.get(n)!.push(await decodeMs({ kvOps: [cut], items: [benchItem(1, rand(n), pos, true)] }));
for (const n of sizes) {
  const s = ms.get(n)!.sort((a, b) => a - b);
  console.log(`pos ${pos} rows ${n}: ${s[2]!.toFixed(1)} ms (${(s[2]! / n).toFixed(3)} ms/row)`);
}
await runner.close();
