// Benchmark (not a test): the raw per-token ceiling of the addon, measured the way llama.cpp's own
// `llama-batched-bench` measures it, so the two can be put side by side on the same model file.
//
// For each parallel level PL: clear the pool; prefill PL distinct prompts of NPP tokens in calls of
// at most --batch tokens (timed: S_PP); then NTG decode steps of PL tokens, one per sequence
// (timed: S_TG). Like batched-bench, every prompt and step token is random, nothing is shared, and
// the prompts request logits only for their last row. Unlike batched-bench, each step samples (the
// addon always does, greedy here) and goes through LlamaRunner.execute(): the row packing, the
// libuv hand-off and the promise are in the time, which is the point.
//
//   node --import tsx bench/native/batched-bench.ts [model.gguf] [--threads 2] [--npp 512] [--ntg 128]
//        [--npl 1,4,8,16] [--ctx 16384] [--batch 2048] [--ubatch 512] [--reps 1] [--json out.json]
//        [--thread-pool on|off] [--thread-poll 0..100]
//
// Compare with, from the same llama.cpp source (bench/peer/README.md builds it):
//   llama-batched-bench -m model.gguf -c 16384 -b 2048 -ub 512 -npp 512 -ntg 128 -npl 1,4,8,16 --kv-unified -t 2
import { writeFileSync } from 'node:fs';
import { LlamaRunner } from '../../src/engine/runner/llama/llama-runner.ts';
import { asSeqId } from '../../src/engine/plan.ts';
import type { RunnerPlan, StepItem } from '../../src/engine/plan.ts';
import { benchArgs, benchItem, step, tokenSource } from './lib.ts';
import { ensureDefaultModel } from '../../src/model/default-model.ts';

const args = process.argv.slice(2);
const { opt, modelPath: given } = benchArgs(args);
const num = (name: string, dflt: number): number => Number(opt(name, String(dflt)));
const modelPath = given ?? (await ensureDefaultModel());
const threads = num('--threads', 2);
const npp = num('--npp', 512);
const ntg = num('--ntg', 128);
const npls = opt('--npl', '1,4,8,16').split(',').map(Number);
const nCtx = num('--ctx', 16384);
const nBatch = num('--batch', 2048);
const nUbatch = num('--ubatch', 512);
const reps = num('--reps', 1);
const jsonOut = opt('--json', '');
const threadPool = opt('--thread-pool', 'on') !== 'off';
const threadPoll = args.includes('--thread-poll') ? num('--thread-poll', 50) : undefined;

const runner = new LlamaRunner({
  modelPath,
  threads,
  maxSequences: Math.max(...npls),
  maxBatchTokens: nBatch,
  microBatchTokens: nUbatch,
  contextTokens: nCtx,
  contextBeyondTrained: true,
  threadPool,
  ...(threadPoll === undefined ? {} : { threadPoll }),
});
const randTokens = tokenSource(runner.info.vocabSize, 12345);
const exec = async (p: RunnerPlan): Promise<number> => (await step(runner, p)).decodeUs;
const clearAll = (): RunnerPlan['kvOps'] =>
  Array.from({ length: runner.info.maxSequences }, (_, s) => ({ kind: 'remove' as const, seqId: asSeqId(s), p0: 0, p1: -1 }));

interface Row {
  pl: number;
  rep: number;
  nKv: number;
  tPpS: number;
  speedPp: number;
  tTgS: number;
  speedTg: number;
  /** median decode step, JS wall (ms) */
  stepMs: number;
  /** median llama_decode inside the step (ms) */
  decodeMs: number;
  /** mean and 90th percentile of the step (ms): stalls show here, not in the median */
  stepMeanMs: number;
  stepP90Ms: number;
}

// Warm-up, as batched-bench does: one short decode.
await exec({ kvOps: clearAll(), items: [benchItem(0, randTokens(16), 0, true)] });

const rows: Row[] = [];
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
for (let rep = 0; rep < reps; rep++) {
  for (const pl of npls) {
    if (pl * (npp + ntg) > nCtx) {
      console.error(`skip pl=${pl}: needs ${pl * (npp + ntg)} cells, the pool has ${nCtx}`);
      continue;
    }
    // Prefill: the PL prompts as one logical batch, cut into calls of nBatch rows (sequence-major).
    const rowsAll: { seq: number; tok: number; pos: number; last: boolean }[] = [];
    for (let s = 0; s < pl; s++) for (let i = 0; i < npp; i++) rowsAll.push({ seq: s, tok: randTokens(1)[0]!, pos: i, last: i === npp - 1 });
    let kvOps = clearAll();
    const t0 = performance.now();
    for (let at = 0; at < rowsAll.length; at += nBatch) {
      const part = rowsAll.slice(at, at + nBatch);
      const items: StepItem[] = [];
      for (const r of part) {
        const prev = items[items.length - 1];
        if (prev !== undefined && prev.seqId === r.seq) (prev.tokens as number[]).push(r.tok);
        else items.push(benchItem(r.seq, [r.tok], r.pos, false));
      }
      // Only each prompt's last row asks for logits (a part's item ends a prompt when it holds pos npp-1).
      const fixed = items.map((it) => ({ ...it, sample: it.startPos + it.tokens.length === npp }));
      await exec({ kvOps, items: fixed });
      kvOps = [];
    }
    const tPp = (performance.now() - t0) / 1000;
    const steps: number[] = [];
    const decodes: number[] = [];
    const t1 = performance.now();
    for (let i = 0; i < ntg; i++) {
      const items = Array.from({ length: pl }, (_, s) => benchItem(s, randTokens(1), npp + i, true));
      const ts = performance.now();
      const us = await exec({ kvOps: [], items });
      steps.push(performance.now() - ts);
      decodes.push(us / 1000);
    }
    const tTg = (performance.now() - t1) / 1000;
    const row: Row = {
      pl,
      rep,
      nKv: pl * (npp + ntg),
      tPpS: tPp,
      speedPp: (pl * npp) / tPp,
      tTgS: tTg,
      speedTg: (pl * ntg) / tTg,
      stepMs: median(steps),
      decodeMs: median(decodes),
      stepMeanMs: steps.reduce((a, b) => a + b, 0) / steps.length,
      stepP90Ms: [...steps].sort((a, b) => a - b)[Math.floor(steps.length * 0.9)]!,
    };
    rows.push(row);
    console.log(
      `PL ${String(pl).padStart(2)}  S_PP ${row.speedPp.toFixed(1).padStart(8)} t/s  S_TG ${row.speedTg.toFixed(1).padStart(7)} t/s  ` +
        `step p50 ${row.stepMs.toFixed(2)} mean ${row.stepMeanMs.toFixed(2)} p90 ${row.stepP90Ms.toFixed(2)} ms (llama_decode p50 ${row.decodeMs.toFixed(2)} ms)`,
    );
  }
}
await runner.close();
if (jsonOut !== '') {
  const info = runner.info.details;
  writeFileSync(jsonOut, JSON.stringify({ modelPath, threads, threadPool: info['threadPool'], threadPoll: info['threadPoll'], npp, ntg, nCtx, nBatch, nUbatch, rows }, null, 2) + '\n');
}
