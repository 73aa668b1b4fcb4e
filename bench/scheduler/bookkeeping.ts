// Scheduler bookkeeping per step (schedule + update, KV accounting and prefix cache included, no
// model) at a steady running batch of 8, 16 and 24 decoding requests, against the 0.5B-class
// model's measured decode step from results/calibration/0.5b-q8_0.json.
//
//   node --import tsx bench/scheduler/bookkeeping.ts
import { readFileSync } from 'node:fs';
import { Request } from '../../src/engine/request.ts';
import { MockRunner } from '../../src/engine/runner/mock/mock-runner.ts';
import type { StepResult } from '../../src/engine/plan.ts';
import { createScheduler } from '../../src/engine/scheduler/factory.ts';

const runner = new MockRunner({ cost: { speed: 0 }, contextTokens: 32768, maxSequences: 64, maxBatchTokens: 512 });
const system = runner.tokenizer.tokenize('the river and the stone '.repeat(100), true);

function request(i: number): Request {
  return new Request({
    id: `r${i}`,
    promptTokens: [...system, ...runner.tokenizer.tokenize(` user ${i} asks about the queue`, false)],
    maxTokens: 64 + (i % 64),
    sampling: { temperature: 0, topP: 1, seed: i },
    ignoreEos: true,
    arrivalMs: i,
    sloMs: 10_000,
    isEog: () => false,
  });
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const calib = JSON.parse(readFileSync('results/calibration/0.5b-q8_0.json', 'utf8')) as { results: { decode: { batch: number; executeMs: { median: number } }[] } };

for (const batch of [8, 16, 24]) {
  const s = createScheduler({ scheduler: 'continuous', maxRunning: batch, maxOutputTokens: 256 }, runner.info);
  let next = 0;
  const times: number[] = [];
  for (let step = 0; step < 4000; step++) {
    while (s.numUnfinished < batch + 4) s.add(request(next++));
    const t0 = performance.now();
    const plan = s.schedule(step);
    const result: StepResult = { ok: true, sampled: plan.runner.items.map((it, k) => (it.sample ? 300 + ((step + k) % 50) : null)), computeMs: 0 };
    s.update(plan, result, step);
    const dt = performance.now() - t0;
    if (step >= 500 && plan.scheduled.length >= batch && plan.scheduled.every((x) => x.numNewTokens === 1)) times.push(dt * 1000);
  }
  const stepMs = calib.results.decode.find((d) => d.batch === Math.min(batch, 16))?.executeMs.median ?? NaN;
  const us = median(times);
  console.log(`batch ${batch}: schedule+update median ${us.toFixed(1)} µs over ${times.length} pure-decode steps (p90 ${[...times].sort((a, b) => a - b)[Math.floor(times.length * 0.9)]!.toFixed(1)} µs); 0.5B decode step at batch ${Math.min(batch, 16)}: ${stepMs} ms; share ${((us / 1000 / stepMs) * 100).toFixed(3)}%`);
}
