// Benchmark (not a test): what saving a sequence to host memory (the prefix cache's host tier, a
// `save` KV op) costs the event loop's thread, into fresh memory and into memory the runner made
// ready while idle (native/src/host_bytes.h). Each saved entry is kept, as the tier keeps them, so
// a cold save always gets fresh pages.
//
//   node --import tsx bench/native/host-save.ts [--tokens 1300,2600] [--reps 5]
import { parseArgs } from 'node:util';
import { asSeqId } from '../../src/engine/plan.ts';
import type { RunnerPlan } from '../../src/engine/plan.ts';
import { LlamaRunner } from '../../src/engine/runner/llama/llama-runner.ts';
import { ensureDefaultModel } from '../../src/model/default-model.ts';

const { values } = parseArgs({ options: { tokens: { type: 'string', default: '1300,2600' }, reps: { type: 'string', default: '5' }, threads: { type: 'string', default: '2' } } });
const runner = new LlamaRunner({ modelPath: await ensureDefaultModel(), threads: Number(values.threads), contextTokens: 16384, contextBeyondTrained: true, maxSequences: 4, maxBatchTokens: 2048 });
const sampling = { temperature: 1, topP: 1, seed: 1 };
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
let key = 0;
async function exec(p: RunnerPlan): Promise<number> {
  const t0 = performance.now();
  const res = await runner.execute(p);
  if (!res.ok) throw new Error(res.message);
  return performance.now() - t0;
}
const save = (): Promise<number> => exec({ kvOps: [{ kind: 'save', seqId: asSeqId(0), key: key++ }], items: [] });

console.log('tokens | save into fresh memory, ms (median, min–max) | save into warm memory, ms');
for (const n of values.tokens.split(',').map(Number)) {
  const prompt = Array.from({ length: n }, (_, i) => 100 + (i % 5000));
  for (let off = 0; off < n; off += 2048) {
    await exec({ kvOps: [], items: [{ requestId: 'a', seqId: asSeqId(0), tokens: prompt.slice(off, off + 2048), startPos: off, sample: off + 2048 >= n, resetSampler: off === 0, sampling }] });
  }
  const cold: number[] = [];
  const warm: number[] = [];
  for (let r = 0; r < Number(values.reps); r++) {
    cold.push(await save());
    // Idle: the runner makes a mapping as large as its largest save ready on a pool thread.
    const fills = runner.hostBytesStats().numFills;
    runner.idle();
    for (let i = 0; i < 2000 && runner.hostBytesStats().numFills === fills; i++) await new Promise((res) => setTimeout(res, 5));
    warm.push(await save());
  }
  const fmt = (xs: number[]): string => `${median(xs).toFixed(1)} (${Math.min(...xs).toFixed(1)}–${Math.max(...xs).toFixed(1)})`;
  console.log(`${n} | ${fmt(cold)} | ${fmt(warm)}`);
  await exec({ kvOps: [{ kind: 'remove', seqId: asSeqId(0), p0: 0, p1: -1 }], items: [] });
}
console.log(JSON.stringify(runner.hostBytesStats()));
await runner.close();
