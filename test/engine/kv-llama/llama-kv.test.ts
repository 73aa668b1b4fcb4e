// The systems core against the real tiny model through llama.cpp: the prefix cache and the KV
// layout must not change what a request generates, and the block accounting must never admit a
// batch llama.cpp refuses.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { SchedulerConfig } from '../../../src/engine/scheduler/factory.ts';
import type { BatchScheduler } from '../../../src/engine/scheduler/batch-scheduler.ts';
import { makeEngine, runJobs } from '../../helpers/engine-driver.ts';
import { openTinyRunner } from '../runner/llama/fixture.ts';

const SYSTEM = `You are a careful assistant. ${'Answer briefly, cite the queue, keep the latency budget, and refuse what cannot be served in time. '.repeat(12)}`;

// What this can and cannot see: the random-weight tiny model's greedy output is nearly independent
// of the prompt (it settles on one repeated token), so equal text here proves the paths agree and
// nothing crashes or garbles, but is weak evidence against contamination. The strong check is the
// mock runner's: its tokens hash the sequence's whole KV history, so a wrong seqCopy source changes
// them (test/api/concurrent-streams.test.ts, test/engine/scheduler/batch-scheduler.test.ts).
// Sampling at temperature > 0 is no better: batch shape changes float summation order in ggml's
// CPU kernels, and a sampler amplifies those last-bit differences into different text.
test('prefix cache on/off, paged/contiguous, fifo: identical greedy text for two requests sharing a long system prompt', async () => {
  const jobs = [
    { prompt: `${SYSTEM}\nUser: what is a river?\nAssistant:`, maxTokens: 24 },
    { prompt: `${SYSTEM}\nUser: tell me about stones.\nAssistant:`, maxTokens: 24 },
  ];
  const configs: SchedulerConfig[] = [
    { scheduler: 'fifo' },
    { scheduler: 'continuous', kv: 'paged', prefixCache: true },
    { scheduler: 'continuous', kv: 'paged', prefixCache: false },
    { scheduler: 'continuous', kv: 'contiguous' },
  ];
  const texts: string[][] = [];
  let hitTokens = 0;
  for (const config of configs) {
    const runner = await openTinyRunner({ contextTokens: 4096, maxSequences: 8 });
    const engine = makeEngine(runner, config);
    // Sequentially first (the second request hits the cache the first one filled), then together.
    const a = await runJobs(engine, [jobs[0]!]);
    const b = await runJobs(engine, [jobs[1]!]);
    const both = await runJobs(engine, jobs);
    if (config.prefixCache === true) hitTokens = engine.stats().scheduler.kv.prefixCache?.hitTokens ?? 0;
    texts.push([a[0]!.text, b[0]!.text, both[0]!.text, both[1]!.text]);
    await engine.stop();
    await runner.close();
  }
  assert.ok(hitTokens > 300, `the cache must really be used for the comparison to mean anything (hit ${hitTokens} tokens)`);
  const [reference, ...rest] = texts;
  rest.forEach((t, i) => assert.deepEqual(t, reference, `config ${JSON.stringify(configs[i + 1])} changed the generated text`));
});

test('pressure at high KV occupancy: llama.cpp never refuses a batch the accounting admitted', async () => {
  // 768 cells for 8 sequences whose prompts + outputs need ~2,000: the scheduler must queue,
  // evict and preempt; llama.cpp must never see a batch it has no cells for.
  const runner = await openTinyRunner({ contextTokens: 768, maxSequences: 8, maxBatchTokens: 256 });
  const engine = makeEngine(runner, { scheduler: 'continuous', maxOutputTokens: 64 });
  let maxUsage = 0;
  engine.onStep(() => (maxUsage = Math.max(maxUsage, engine.stats().scheduler.kv.usage)));
  const systems = [SYSTEM.slice(0, 600), SYSTEM.slice(200, 900)];
  const jobs = Array.from({ length: 16 }, (_, i) => ({ prompt: `${systems[i % 2]!} question ${i}: ${'why '.repeat(i % 7)}`, maxTokens: 16 + ((i * 11) % 48) }));
  const out = await runJobs(engine, jobs);
  const sched = engine.scheduler as BatchScheduler;
  assert.equal(sched.numRunnerRefusals, 0, 'llama.cpp refused a batch the accounting admitted');
  assert.ok(out.every((o) => o.reason === 'length'), 'every request completed');
  assert.ok(maxUsage >= 0.75, `the test must reach high occupancy (max ${maxUsage.toFixed(2)})`);
  sched.checkInvariants();
  await engine.stop();
  await runner.close();
});

test('host tier on llama.cpp: a shared prompt placed back from host memory, same greedy text, under pressure too', async () => {
  const jobs = ['what is a river?', 'tell me about stones.', 'and the sea?'].map((q) => ({ prompt: `${SYSTEM}\nUser: ${q}\nAssistant:`, maxTokens: 20 }));
  const texts: string[][] = [];
  let host: { numLoads: number; hitTokens: number } | null = null;
  for (const hostTierTokens of [0, 16384]) {
    const runner = await openTinyRunner({ contextTokens: 2048, maxSequences: 4 });
    const engine = makeEngine(runner, { scheduler: 'continuous', hostTierTokens });
    const t: string[] = [];
    for (const job of jobs) t.push((await runJobs(engine, [job]))[0]!.text);
    // Then all at once in a pool too small for them together: loads, evictions and waits interleave.
    const together = await runJobs(engine, [...jobs, ...jobs]);
    assert.ok(together.every((o) => o.reason === 'length'));
    t.push(...together.map((o) => o.text));
    texts.push(t);
    if (hostTierTokens > 0) host = engine.stats().scheduler.kv.prefixCache?.host ?? null;
    assert.equal((engine.scheduler as BatchScheduler).numRunnerRefusals, 0);
    await engine.stop();
    await runner.close();
  }
  assert.ok(host !== null && host.numLoads >= 2 && host.hitTokens > 400, `the host tier must really be used (${JSON.stringify(host)})`);
  assert.deepEqual(texts[1], texts[0]);
});
