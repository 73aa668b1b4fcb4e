// Benchmark (not a test): what each sampling setting costs per sampled token on the C++ side (the
// decode worker's sampleUs), batch 1, against greedy. The settings that look at the whole
// vocabulary per token (top-p's sort, penalties, the grammar, log-probabilities' log-softmax and
// top-k) grow with its size; docs/sampling.md quotes a run.
//
//   node --import tsx bench/native/sampling-cost.ts [model.gguf] [--threads N] [--steps N]
import { LlamaRunner } from '../../src/engine/runner/llama/llama-runner.ts';
import { asSeqId } from '../../src/engine/plan.ts';
import type { SamplingParams } from '../../src/engine/plan.ts';
import { calibrationPrompt, spread } from '../../src/engine/runner/llama/calibrate.ts';
import { jsonSchemaToGbnf } from '../../src/engine/grammar/json-schema-gbnf.ts';
import { ensureDefaultModel } from '../../src/model/default-model.ts';

const args = process.argv.slice(2);
const flag = (name: string, dflt: number): number => {
  const i = args.indexOf(name);
  return i >= 0 ? Number(args[i + 1]) : dflt;
};
const modelPath = args[0] !== undefined && !args[0].startsWith('--') ? args[0] : await ensureDefaultModel();
const threads = flag('--threads', 1);
const steps = flag('--steps', 60);

const runner = new LlamaRunner({ modelPath, threads, maxSequences: 2, contextTokens: 2048 });
const prompt = calibrationPrompt(runner, 16);
// A grammar that never ends inside the run: strings in an array.
const grammar = jsonSchemaToGbnf({ type: 'array', items: { type: 'string', maxLength: 50 }, maxItems: 1000 });
const base = { temperature: 0, topP: 1, seed: 0 };
const settings: [string, SamplingParams][] = [
  ['greedy', base],
  ['temperature 1, top_p 0.9', { ...base, temperature: 1, topP: 0.9 }],
  ['temperature 1, top_k 40', { ...base, temperature: 1, topK: 40 }],
  ['logprobs, 20 alternatives', { ...base, logprobs: 20 }],
  ['repetition + frequency penalties', { ...base, repetitionPenalty: 1.2, frequencyPenalty: 0.5 }],
  ['grammar (JSON array of strings)', { ...base, grammar }],
];
console.log(`model ${modelPath}, vocabulary ${runner.info.vocabSize}, threads ${threads}, ${steps} decode steps per setting`);
for (const [name, sampling] of settings) {
  const seqId = asSeqId(0);
  const first = await runner.execute({ kvOps: [{ kind: 'remove', seqId, p0: 0, p1: -1 }], items: [{ requestId: 'b', seqId, tokens: prompt, startPos: 0, sample: true, resetSampler: true, sampling, samplerHistory: { tokens: prompt, numPromptTokens: prompt.length } }] });
  if (!first.ok) throw new Error(first.message);
  let last = first.sampled[0]!;
  const sampleUs: number[] = [];
  for (let i = 0; i < steps; i++) {
    const r = await runner.execute({ kvOps: [], items: [{ requestId: 'b', seqId, tokens: [last], startPos: prompt.length + i, sample: true, resetSampler: false, sampling }] });
    if (!r.ok) throw new Error(r.message);
    last = r.sampled[0]!;
    sampleUs.push(runner.lastTiming!.sampleUs);
  }
  const s = spread(sampleUs);
  console.log(`${name.padEnd(34)} sample µs per token: median ${s.median.toFixed(0)} (min ${s.min.toFixed(0)}, max ${s.max.toFixed(0)})`);
}
await runner.close();
