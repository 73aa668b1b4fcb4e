// The mixed-size overload of bench/kv/mixed-overload.sh, simulated in virtual time: the scheduler
// and the mock runner's KV model run as fast as they can, and each step advances a virtual clock
// by the mock's cost model (2 ms + 0.05 ms per prompt token + 0.5 ms per decoding sequence, speed
// 1). So it measures the scheduler's decisions only — no HTTP, no event loop, no machine noise —
// and sweeps settings in seconds (the watermark, the preemption cap). Open loop: Poisson arrivals,
// clients that give up after --timeout-s (aborted, as the API does on disconnect). Closed loop:
// --closed N requests outstanding at all times. Completed throughput counts finishes inside
// [warmup, duration]. The same script runs on an older tree (it uses only createScheduler,
// MockRunner and Request), which is how the "before" column is produced.
//
//   node --import tsx bench/kv/sim-overload.ts --rate 6.8 --timeout-s 30 [--watermark 0.01,0.05] [--max-preemptions 2] [--closed 8] [--seeds 1,2,3]

import type { RequestOutput } from '../../src/engine/outputs.ts';
import { Request } from '../../src/engine/request.ts';
import { MockRunner } from '../../src/engine/runner/mock/mock-runner.ts';
import { createScheduler } from '../../src/engine/scheduler/factory.ts';

const arg = (name: string, dflt: string): string => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] ?? dflt : dflt;
};
const list = (s: string): number[] => s.split(',').map(Number);
const ctx = Number(arg('ctx', '8192'));
const seqs = Number(arg('seqs', '16'));
const rate = Number(arg('rate', '6.8'));
const closed = Number(arg('closed', '0'));
const durationS = Number(arg('duration-s', '40'));
const warmupS = Number(arg('warmup-s', '5'));
const timeoutS = Number(arg('timeout-s', '30'));
const watermarks = list(arg('watermark', '0.01'));
const caps = list(arg('max-preemptions', '2'));
const seeds = list(arg('seeds', '1,2,3'));
// The harness's mixed sizes scaled to the pool (src/bench/workloads.ts mixedScale), 128-token outputs.
const scale = Math.min(1, ctx / ((8192 + 128) * 1.05));
const sizes = [512, 2048, 8192].map((n) => Math.round(n * scale));
const COST = { stepMs: 2, prefillTokenMs: 0.05, decodeSeqMs: 0.5 };

function lcg(seed: number): () => number {
  let s = seed >>> 0 || 1;
  return () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
}

interface Result { completed: number; inWindow: number; preemptions: number; timeouts: number; stepsMs: number }

async function simulate(config: Parameters<typeof createScheduler>[0], seed: number): Promise<Result> {
  const runner = new MockRunner({ cost: { speed: 0 }, contextTokens: ctx, maxSequences: seqs, maxBatchTokens: 512 });
  const s = createScheduler(config, runner.info);
  const rand = lcg(seed);
  const live = new Set<Request>();
  let completed = 0;
  let inWindow = 0;
  let timeouts = 0;
  let id = 0;
  let nowMs = 0;
  let nextArrivalMs = closed > 0 ? Infinity : -Math.log(1 - rand()) * 1000 / rate;
  const byId = new Map<string, Request>();
  const onOutputs = (outputs: readonly RequestOutput[]): void => {
    for (const out of outputs) {
      if (out.finishReason === null) continue;
      live.delete(byId.get(out.requestId)!);
      byId.delete(out.requestId);
      if (out.finishReason === 'length') {
        completed++;
        if (nowMs >= warmupS * 1000 && nowMs <= durationS * 1000) inWindow++;
      }
      if (closed > 0 && nowMs < durationS * 1000) arrive(nowMs);
    }
  };
  const arrive = (atMs: number): void => {
    const n = sizes[Math.floor(rand() * 3)]!;
    const prompt = [1, ...Array.from({ length: n - 1 }, () => 259 + Math.floor(rand() * 150))];
    const req: Request = new Request({
      id: `r${id++}`, promptTokens: prompt, maxTokens: 128, sampling: { temperature: 0, topP: 1, seed: 1 }, ignoreEos: true,
      arrivalMs: atMs, sloMs: 10_000, isEog: () => false,
    });
    byId.set(req.id, req);
    live.add(req);
    s.add(req);
  };
  for (let i = 0; i < closed; i++) arrive(0);
  while (nowMs < durationS * 1000 + timeoutS * 1000 && (live.size > 0 || nextArrivalMs < durationS * 1000)) {
    while (nextArrivalMs <= nowMs && nextArrivalMs < durationS * 1000) {
      arrive(nextArrivalMs);
      nextArrivalMs += -Math.log(1 - rand()) * 1000 / rate;
    }
    for (const r of live) {
      if (nowMs - r.arrivalMs > timeoutS * 1000 && !r.abortRequested) {
        timeouts++;
        s.abort(r);
      }
    }
    const plan = s.schedule(nowMs);
    onOutputs(plan.outputs);
    if (plan.runner.items.length === 0 && plan.runner.kvOps.length === 0) {
      // Idle until the next arrival (or the next timeout, which frees a waiting request).
      const nextTimeout = Math.min(...[...live].map((r) => r.arrivalMs + timeoutS * 1000 + 1));
      nowMs = Math.max(nowMs + 1, Math.min(nextArrivalMs, nextTimeout));
      continue;
    }
    const result = await runner.execute(plan.runner);
    let prefill = 0;
    let decode = 0;
    for (const it of plan.runner.items) {
      if (it.tokens.length === 1 && it.startPos > 0 && it.sample && !it.resetSampler) decode++;
      else prefill += it.tokens.length;
    }
    if (plan.runner.items.length > 0) nowMs += COST.stepMs + COST.prefillTokenMs * prefill + COST.decodeSeqMs * decode;
    onOutputs(s.update(plan, result, nowMs));
  }
  return { completed, inWindow, preemptions: s.snapshot().numPreemptions, timeouts, stepsMs: nowMs };
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
console.log(`mixed sizes ${sizes.join('/')} tokens, ${ctx} cells, ${seqs} sequences, ${closed > 0 ? `closed loop ${closed}` : `open loop ${rate} rps, client timeout ${timeoutS} s`}, ${durationS} s (warmup ${warmupS} s), seeds ${seeds.join(',')}`);
console.log('| watermark | max preemptions | completed rps in window, median (range) | preemptions / completed, median (range) | timeouts |');
console.log('|---|---|---|---|---|');
for (const wm of watermarks) {
  for (const cap of caps) {
    const rs: Result[] = [];
    for (const seed of seeds) rs.push(await simulate({ scheduler: 'continuous', maxOutputTokens: 512, kvWatermark: wm, maxPreemptions: cap }, seed));
    const tput = rs.map((r) => r.inWindow / (durationS - warmupS));
    const ppc = rs.map((r) => r.preemptions / Math.max(1, r.completed));
    const f = (x: number): string => x.toFixed(2);
    console.log(`| ${wm} | ${cap} | ${f(median(tput))} (${f(Math.min(...tput))}–${f(Math.max(...tput))}) | ${f(median(ppc))} (${f(Math.min(...ppc))}–${f(Math.max(...ppc))}) | ${median(rs.map((r) => r.timeouts))} |`);
  }
}
