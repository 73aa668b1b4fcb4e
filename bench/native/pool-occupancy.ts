// Benchmark (not a test): how a decode step's cost depends on how full the unified KV pool is.
// With kv_unified = true, llama.cpp attends over the used range of the whole pool (other
// sequences' cells are masked, not skipped), so a batch-1 decode step should get slower as other
// sequences fill the pool even though its own context is unchanged. A and B are interleaved so
// machine noise hits both alike.
//
//   node --import tsx bench/native/pool-occupancy.ts [model.gguf] [--threads N] [--steps N]
import { LlamaRunner } from '../../src/engine/runner/llama/llama-runner.ts';
import { asSeqId } from '../../src/engine/plan.ts';
import type { RunnerPlan } from '../../src/engine/plan.ts';
import { calibrationPrompt, spread } from '../../src/engine/runner/llama/calibrate.ts';
import { ensureDefaultModel } from '../../src/model/default-model.ts';

const args = process.argv.slice(2);
const flag = (name: string, dflt: number): number => {
  const i = args.indexOf(name);
  return i >= 0 ? Number(args[i + 1]) : dflt;
};
const modelPath = args[0] !== undefined && !args[0].startsWith('--') ? args[0] : await ensureDefaultModel();
const threads = flag('--threads', 2);
const steps = flag('--steps', 20);
const fillers = flag('--fillers', 7);

const runner = new LlamaRunner({ modelPath, threads, maxSequences: 16, maxBatchTokens: 512, contextTokens: 8192 });
const greedy = { temperature: 0, topP: 1, seed: 0 };
const item = (seq: number, tokens: number[], startPos: number): RunnerPlan['items'][number] => ({
  requestId: `b${seq}`,
  seqId: asSeqId(seq),
  tokens,
  startPos,
  sample: true,
  resetSampler: false,
  sampling: greedy,
});
const exec = async (p: RunnerPlan): Promise<number> => {
  const res = await runner.execute(p);
  if (!res.ok) throw new Error(res.message);
  return runner.lastTiming?.decodeUs ?? 0;
};

const own = calibrationPrompt(runner, 128);
const filler = calibrationPrompt(runner, 512, 1);
await exec({ kvOps: [], items: [item(0, own, 0)] });
const pos = own.length;
const emptyUs: number[] = [];
const fullUs: number[] = [];
const fill = async (): Promise<void> => {
  for (let s = 1; s <= fillers; s++) await exec({ kvOps: [], items: [item(s, filler, 0)] });
};
const drop = Array.from({ length: fillers }, (_, k) => ({ kind: 'remove' as const, seqId: asSeqId(k + 1), p0: 0, p1: -1 }));
// Blocks rather than single steps alternate, so the pool is filled only twice.
for (let round = 0; round < 2; round++) {
  for (let i = 0; i < steps; i++) {
    // A: only seq 0's cells in the pool (the step's own cell is removed again after it).
    emptyUs.push(await exec({ kvOps: [], items: [item(0, [own[i % own.length]!], pos)] }));
    await exec({ kvOps: [{ kind: 'remove', seqId: asSeqId(0), p0: pos, p1: -1 }], items: [] });
  }
  await fill();
  for (let i = 0; i < steps; i++) {
    // B: the same step with `fillers` other sequences of 512 cells each in the pool.
    fullUs.push(await exec({ kvOps: [], items: [item(0, [own[i % own.length]!], pos)] }));
    await exec({ kvOps: [{ kind: 'remove', seqId: asSeqId(0), p0: pos, p1: -1 }], items: [] });
  }
  await exec({ kvOps: drop, items: [] });
}
await runner.close();
const ms = (xs: number[]) => spread(xs.map((x) => x / 1000));
console.log(JSON.stringify({ modelPath: modelPath.split('/').pop(), threads, ownCells: own.length + 1, otherCells: fillers * filler.length, decodeMsPoolNearlyEmpty: ms(emptyUs), decodeMsPoolFull: ms(fullUs) }, null, 2));
