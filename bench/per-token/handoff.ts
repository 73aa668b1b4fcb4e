// The thread hand-offs around one decode step: the llama runner alone (no server), one sequence with a
// CTX-token context (default 1,500), STEPS batch-1 decode steps (default 300, temperature 1), every
// step on a libuv pool thread and then inline (on the JS thread: --inline-step-ms), ROUNDS times
// alternating. Prints the medians of execute() (what the engine waits for), llama_decode, sampling,
// and the two hand-offs the addon reports (call → worker start, worker end → JS thread).
//
//   node --import tsx bench/per-token/handoff.ts [--model models/tiny.gguf] [--threads 2]   (CTX=1500 STEPS=300 ROUNDS=2)
//
// On a quiet machine the hand-offs are small (~0.01 and ~0.02 ms); with a streaming client beside
// the server they grew to ~0.12 and ~0.03 ms (docs/per-token.md §10).
import { parseArgs } from 'node:util';
import { asSeqId } from '../../src/engine/plan.ts';
import type { SamplingParams, StepItem } from '../../src/engine/plan.ts';
import { LlamaRunner } from '../../src/engine/runner/llama/llama-runner.ts';
import { ensureDefaultModel } from '../../src/model/default-model.ts';

const { values } = parseArgs({ options: { model: { type: 'string' }, threads: { type: 'string', default: '2' } } });
const ctxLen = Number(process.env['CTX'] ?? 1500);
const numSteps = Number(process.env['STEPS'] ?? 300);
const rounds = Number(process.env['ROUNDS'] ?? 2);
const modelPath = values.model ?? (await ensureDefaultModel());
const sampling: SamplingParams = { temperature: 1, topP: 1, seed: 1 };
const med = (xs: number[]): string => [...xs].sort((a, b) => a - b)[xs.length >> 1]!.toFixed(3);
const item = (tokens: number[], startPos: number, resetSampler: boolean): StepItem => ({ requestId: 'a', seqId: asSeqId(0), tokens, startPos, sample: true, resetSampler, sampling });

async function measure(inlineStepMs: number): Promise<string> {
  const runner = new LlamaRunner({ modelPath, threads: Number(values.threads), contextTokens: 16384, contextBeyondTrained: true, maxSequences: 8, maxBatchTokens: 2048, inlineStepMs });
  try {
    const prompt = Array.from({ length: ctxLen }, (_, i) => 100 + ((i * 31) % 1000));
    let pos = 0;
    let tok = 0;
    for (let off = 0; off < ctxLen; off += 2048) {
      const res = await runner.execute({ kvOps: [], items: [item(prompt.slice(off, off + 2048), off, off === 0)] });
      if (!res.ok) throw new Error(res.message);
      pos = Math.min(ctxLen, off + 2048);
      tok = res.sampled[0]!;
    }
    const cols = { execute: [] as number[], decode: [] as number[], sample: [] as number[], queue: [] as number[], return: [] as number[] };
    let numInline = 0;
    for (let i = 0; i < numSteps; i++) {
      const res = await runner.execute({ kvOps: [], items: [item([tok], pos++, false)] });
      if (!res.ok) throw new Error(res.message);
      tok = res.sampled[0]!;
      const t = runner.lastTiming!;
      cols.execute.push(t.executeMs);
      cols.decode.push(t.decodeUs / 1000);
      cols.sample.push(t.sampleUs / 1000);
      cols.queue.push(t.queueUs / 1000);
      cols.return.push(t.returnUs / 1000);
      if (t.inline) numInline++;
    }
    return `${Object.entries(cols).map(([k, v]) => `${k} ${med(v)}`).join(', ')} ms; ${numInline}/${numSteps} inline`;
  } finally {
    await runner.close();
  }
}

console.log(`context ${ctxLen}, ${numSteps} batch-1 decode steps, ${values.threads} threads; medians:`);
for (let r = 1; r <= rounds; r++) {
  for (const ms of [0, 5]) console.log(`round ${r}, --inline-step-ms ${ms}: ${await measure(ms)}`);
}
