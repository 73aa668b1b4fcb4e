// The batching schedulers against the mock runner, whose simulated unified KV pool refuses what
// llama.cpp would refuse and checks every sequence is fed at its next position.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { MockRunner } from '../../../src/engine/runner/mock/mock-runner.ts';
import { createScheduler } from '../../../src/engine/scheduler/factory.ts';
import type { SchedulerConfig } from '../../../src/engine/scheduler/factory.ts';
import type { BatchScheduler } from '../../../src/engine/scheduler/batch-scheduler.ts';
import type { Request } from '../../../src/engine/request.ts';
import { deliver, makeEngine, makeRequest, runJobs, stepOnce } from '../../helpers/engine-driver.ts';
import type { Outcome } from '../../helpers/engine-driver.ts';

const longPrompt = (tag: string, words = 60): string => `${tag}: ${'the river and the stone '.repeat(words / 5)}`;

/** Step the scheduler by hand: schedule → execute → update, recording which requests each plan carried. */
async function stepUntilIdle(s: ReturnType<typeof createScheduler>, runner: MockRunner, onStep: (ids: string[], step: number) => void | Promise<void>): Promise<void> {
  for (let step = 0; step < 10_000 && s.numUnfinished > 0; step++) {
    const plan = await stepOnce(s, runner, step);
    await onStep(plan.scheduled.map((x) => x.request.id), step);
  }
  assert.equal(s.numUnfinished, 0, 'scheduler did not drain');
}

function req(runner: MockRunner, id: string, prompt: string, maxTokens: number, arrivalMs: number, out: Outcome[]): Request {
  const engineLike = { runner, now: () => arrivalMs } as unknown as Parameters<typeof makeRequest>[0];
  return makeRequest(engineLike, { prompt, maxTokens }, id, out);
}

test('a late arrival joins a running continuous batch at the next step', async () => {
  const runner = new MockRunner({ cost: { speed: 0 } });
  const s = createScheduler({ scheduler: 'continuous', maxOutputTokens: 64 }, runner.info);
  const out: Outcome[] = [];
  s.add(req(runner, 'early', 'early bird', 30, 0, out));
  let joinedAt = -1;
  await stepUntilIdle(s, runner, (ids, step) => {
    if (step === 5) s.add(req(runner, 'late', 'late comer', 5, 5, out));
    if (joinedAt < 0 && ids.includes('late')) {
      joinedAt = step;
      assert.ok(ids.includes('early'), 'the late request shares the step with the running one');
    }
  });
  assert.equal(joinedAt, 6);
  assert.deepEqual(out.map((o) => o.reason), ['length', 'length']);
});

test('a late arrival provably cannot join a running static batch', async () => {
  const runner = new MockRunner({ cost: { speed: 0 } });
  const s = createScheduler({ scheduler: 'static', staticBatchSize: 2, staticWaitMs: 1000, maxOutputTokens: 64 }, runner.info);
  const out: Outcome[] = [];
  s.add(req(runner, 'a', 'first of the batch', 20, 0, out));
  s.add(req(runner, 'b', 'second of the batch', 30, 0, out));
  const stepsWith = new Map<string, number[]>();
  await stepUntilIdle(s, runner, (ids, step) => {
    if (step === 3) s.add(req(runner, 'late', 'late comer', 5, 3, out));
    for (const id of ids) stepsWith.set(id, [...(stepsWith.get(id) ?? []), step]);
  });
  const lastOfBatch = Math.max(...stepsWith.get('a')!, ...stepsWith.get('b')!);
  const firstLate = Math.min(...stepsWith.get('late')!);
  assert.ok(firstLate > lastOfBatch, `late request ran at step ${firstLate}, before the batch ended at ${lastOfBatch}`);
  assert.equal(stepsWith.get('a')![0], 0, 'a full batch starts at once');
});

test('static batching waits to fill, then starts on the timeout', () => {
  const runner = new MockRunner({ cost: { speed: 0 } });
  const s = createScheduler({ scheduler: 'static', staticBatchSize: 4, staticWaitMs: 50, maxOutputTokens: 64 }, runner.info);
  s.add(req(runner, 'a', 'alone', 3, 100, []));
  const idle = s.schedule(120);
  assert.equal(idle.scheduled.length, 0);
  assert.equal(idle.wakeAtMs, 150, 'it asks to be woken when the oldest request has waited staticWaitMs');
  assert.equal(s.schedule(150).scheduled.length, 1);
});

test('chunked prefill: no step carries more than the token budget, decodes ride along with prefill chunks', async () => {
  const runner = new MockRunner({ cost: { speed: 0 }, maxBatchTokens: 64 });
  // The fixed cap (stepTarget 'off'); the step-time budget that replaces it by default: step-cost.test.ts.
  const s = createScheduler({ scheduler: 'continuous', prefillChunkTokens: 32, maxOutputTokens: 64, stepTarget: 'off' }, runner.info);
  const out: Outcome[] = [];
  s.add(req(runner, 'short', 'hi', 20, 0, out));
  s.add(req(runner, 'long', longPrompt('long', 200), 5, 1, out));
  let mixed = 0;
  for (let step = 0; s.numUnfinished > 0 && step < 1000; step++) {
    await stepOnce(s, runner, step, (plan) => {
      const n = plan.runner.items.reduce((a, it) => a + it.tokens.length, 0);
      assert.ok(n <= 64, `step ${step} carried ${n} tokens`);
      // Beside a decode row a prompt chunk is capped at 32; with nothing decoding it may take the step's whole budget.
      const decoding = plan.runner.items.some((it) => it.tokens.length === 1 && it.startPos > 0);
      for (const it of plan.runner.items) if (it.tokens.length > 1 && decoding) assert.ok(it.tokens.length <= 32, `a ${it.tokens.length}-token chunk beside decoding`);
      if (plan.runner.items.some((it) => it.tokens.length === 1) && plan.runner.items.some((it) => it.tokens.length > 1)) mixed++;
    });
  }
  assert.ok(mixed > 0, 'decode steps of one request shared steps with the other request\'s prefill chunks');
});

test('the prefix cache turns a shared system prompt into hits (retain all: from the second request on)', async () => {
  const runner = new MockRunner({ cost: { speed: 0 }, contextTokens: 8192 });
  const engine = makeEngine(runner, { scheduler: 'continuous', cacheRetain: 'all' });
  const system = longPrompt('system', 100);
  const first = await runJobs(engine, [{ prompt: `${system} user one`, maxTokens: 4 }]);
  const later = await runJobs(engine, [{ prompt: `${system} user two`, maxTokens: 4 }]);
  assert.equal(first[0]!.request.numCachedTokens, 0);
  const promptLen = later[0]!.request.numPromptTokens;
  assert.ok(later[0]!.request.numCachedTokens >= promptLen - 32, `only ${later[0]!.request.numCachedTokens} of ${promptLen} tokens hit`);
  await engine.stop();
});

test('retain seen (the default): a unique prompt leaves nothing in the pool; a shared system prompt is kept at its second occurrence and hit from the third', async () => {
  const runner = new MockRunner({ cost: { speed: 0 }, contextTokens: 8192 });
  const engine = makeEngine(runner, { scheduler: 'continuous' });
  const kvUsed = (): number => {
    const kv = engine.stats().scheduler.kv;
    return kv.numBlocks - kv.numFreeBlocks;
  };
  const system = longPrompt('system', 100);
  const [first] = await runJobs(engine, [{ prompt: `${system} user one`, maxTokens: 4 }]);
  assert.equal(kvUsed(), 0, 'the first occurrence is not retained');
  const [second] = await runJobs(engine, [{ prompt: `${system} user two`, maxTokens: 4 }]);
  const kept = kvUsed() * 16;
  assert.ok(kept > 0 && kept < second!.request.numPromptTokens - 4, `the second keeps the shared part only: ${kept} cells of a ${second!.request.numPromptTokens}-token prompt`);
  const [third] = await runJobs(engine, [{ prompt: `${system} user three`, maxTokens: 4 }]);
  assert.equal(first!.request.numCachedTokens, 0);
  assert.equal(second!.request.numCachedTokens, 0);
  assert.equal(third!.request.numCachedTokens, kept, 'the third hits exactly what the second kept');
  await runJobs(engine, [{ prompt: longPrompt('something else entirely', 100), maxTokens: 4 }]);
  assert.equal(kvUsed() * 16, kept, 'a unique prompt adds nothing');
  await engine.stop();
});

test('cacheMaxFraction 0 (the default with the host tier): a document\'s first occurrence, while it runs, is shared with one that arrives beside it; the default without the tier keeps it to itself', async () => {
  const system = longPrompt('system', 100);
  const run = async (config: SchedulerConfig): Promise<{ cached: number; prompt: number; tokens: number[][] }> => {
    const runner = new MockRunner({ cost: { speed: 0 }, contextTokens: 8192 });
    const s = createScheduler({ maxOutputTokens: 64, ...config }, runner.info);
    const out: Outcome[] = [];
    s.add(req(runner, 'first', `${system} user one`, 40, 0, out));
    const second = req(runner, 'second', `${system} user two`, 8, 5, out);
    await stepUntilIdle(s, runner, (ids, step) => {
      // By step 5 the first prompt is computed and the first request decodes.
      if (step === 5) {
        assert.ok(ids.includes('first'));
        s.add(second);
      }
    });
    return { cached: second.numCachedTokens, prompt: second.numPromptTokens, tokens: out.map((o) => o.tokens) };
  };
  const seen = await run({ scheduler: 'continuous' });
  const lean = await run({ scheduler: 'continuous', cacheMaxFraction: 0 });
  // The host tier holds nothing yet (the first request has not finished): what is shared is the pool's.
  const host = await run({ scheduler: 'continuous', hostTierTokens: 8192 });
  assert.equal(seen.cached, 0, 'the doorkeeper keeps a first occurrence out of the cache');
  assert.ok(lean.cached >= lean.prompt - 32, `only ${lean.cached} of ${lean.prompt} tokens shared`);
  assert.equal(host.cached, lean.cached, 'with the host tier and no --cache-max-fraction the pool keeps nothing idle, so it shares');
  assert.deepEqual(lean.tokens, seen.tokens, 'sharing changes no token');
  assert.deepEqual(host.tokens, seen.tokens);
});

/** Run a random workload through a scheduler, with random client aborts, under KV pressure. */
async function randomWorkload(config: SchedulerConfig, seed: number, numCells: number, maxSequences: number): Promise<{ outcomes: Outcome[]; sched: BatchScheduler; runner: MockRunner }> {
  const runner = new MockRunner({ cost: { speed: 0 }, contextTokens: numCells, maxSequences, maxBatchTokens: 128 });
  const sched = createScheduler({ maxOutputTokens: 48, ...config }, runner.info) as BatchScheduler;
  const rng = fc.sample(fc.integer({ min: 0, max: 1_000_000 }), { seed, numRuns: 400 });
  let k = 0;
  const next = (n: number): number => rng[k++ % rng.length]! % n;
  const systems = ['alpha', 'beta', 'gamma'].map((t) => longPrompt(t, 20 + next(40)));
  const out: Outcome[] = [];
  const pending: Request[] = [];
  for (let i = 0; i < 40; i++) {
    const prompt = next(3) > 0 ? `${systems[next(3)]!} q${i}` : longPrompt(`unique ${i}`, 10 + next(30));
    pending.push(req(runner, `r${i}`, prompt, 1 + next(48), i, out));
  }
  for (let step = 0; step < 20_000 && (pending.length > 0 || sched.numUnfinished > 0); step++) {
    if (pending.length > 0 && next(3) === 0) sched.add(pending.shift()!);
    if (next(25) === 0 && out.length > 0) {
      const victim = out[next(out.length)]!;
      if (victim.reason === null) sched.abort(victim.request);
    }
    await stepOnce(sched, runner, step);
  }
  // One last step applies the KV operations of the final finishes.
  const tail = sched.schedule(1e9);
  await runner.execute(tail.runner);
  return { outcomes: out, sched, runner };
}

test('random workloads with aborts under KV pressure: invariants hold every step, nothing leaks, the runner never refuses', async () => {
  let preemptions = 0;
  let hits = 0;
  for (const config of [{ scheduler: 'continuous' }, { scheduler: 'continuous', prefixCache: false }, { scheduler: 'continuous', kv: 'contiguous' }, { scheduler: 'static', staticBatchSize: 4, prefixCache: false }] as SchedulerConfig[]) {
    for (let seed = 1; seed <= 6; seed++) {
      const { outcomes, sched, runner } = await randomWorkload(config, seed, 512, 8);
      const snap = sched.snapshot();
      assert.ok(outcomes.every((o) => o.reason !== null), 'every request finished');
      assert.equal(sched.numRunnerRefusals, 0, `${JSON.stringify(config)} seed ${seed}: the runner refused a batch the accounting admitted`);
      assert.equal(snap.numRunning + snap.numWaiting, 0);
      // Baseline: cache-held blocks aside, nothing is held; with the cache off, nothing at all.
      if (config.prefixCache === false || config.kv === 'contiguous') {
        assert.equal(snap.numFreeSeqIds, 8, 'sequence ids back at baseline');
      }
      if (config.prefixCache === false) {
        assert.equal(snap.kv.numFreeBlocks, snap.kv.numBlocks, 'blocks back at baseline');
        assert.equal(runner.numUsedCells, 0, 'llama-side cells back at baseline');
      }
      preemptions += snap.numPreemptions;
      hits += snap.kv.prefixCache?.hitTokens ?? 0;
    }
  }
  assert.ok(preemptions > 0, 'the pressure setting never preempted: the test would not see preemption bugs');
  assert.ok(hits > 0, 'the prefix cache never hit');
});

test('greedy text is the same with and without KV pressure (preemption by recompute loses nothing)', async () => {
  const jobs = Array.from({ length: 12 }, (_, i) => ({ prompt: longPrompt(`job ${i}`, 20 + 5 * i), maxTokens: 40 }));
  const roomy = await runJobs(makeEngine(new MockRunner({ cost: { speed: 0 }, contextTokens: 16384, maxSequences: 16 }), { scheduler: 'continuous' }), jobs);
  const tightRunner = new MockRunner({ cost: { speed: 0 }, contextTokens: 640, maxSequences: 16 });
  const tightEngine = makeEngine(tightRunner, { scheduler: 'continuous', prefixCache: false });
  const tight = await runJobs(tightEngine, jobs);
  assert.ok(tightEngine.stats().scheduler.numPreemptions > 0, 'the tight pool must force preemptions');
  assert.deepEqual(tight.map((o) => o.text), roomy.map((o) => o.text));
  await tightEngine.stop();
});

test('a burst of requests with one system prompt: duplicated prefix cells stay accounted until their sequence is released', async () => {
  // Three requests with a 160-token system prompt and distinct 32-token tails are prefilled in the
  // same step, so each computes the system prompt itself; the cache keeps the first copy. The
  // other two sequences own their tails' nodes, so llama.cpp keeps their duplicate copies of the
  // system prompt alive. If the accounting forgot them, the next big request would be admitted
  // into cells that are not free, and the runner (the mock's exact cell model) would refuse it.
  const runner = new MockRunner({ cost: { speed: 0 }, contextTokens: 640, maxSequences: 8, maxBatchTokens: 1024 });
  const sched = createScheduler({ scheduler: 'continuous', maxOutputTokens: 16, prefillChunkTokens: 1024 }, runner.info) as BatchScheduler;
  const sys = Array.from({ length: 160 }, (_, i) => 300 + (i % 50));
  const tail = (k: number): number[] => Array.from({ length: 32 }, (_, i) => 260 + ((i * 7 + k * 13) % 30));
  const out: Outcome[] = [];
  const engineLike = { runner, now: () => 0 } as unknown as Parameters<typeof makeRequest>[0];
  for (let k = 0; k < 3; k++) sched.add(makeRequest(engineLike, { prompt: [1, ...sys, ...tail(k)], maxTokens: 1 }, `burst-${k}`, out));
  const first = sched.schedule(0);
  deliver(first.outputs);
  assert.equal(first.scheduled.length, 3, 'the burst is prefilled in one step');
  deliver(sched.update(first, await runner.execute(first.runner), 0));
  sched.add(makeRequest(engineLike, { prompt: Array.from({ length: 300 }, (_, i) => 260 + (i % 90)), maxTokens: 4 }, 'big', out));
  for (let step = 1; step < 50 && sched.numUnfinished > 0; step++) {
    await stepOnce(sched, runner, step);
  }
  assert.equal(sched.numRunnerRefusals, 0, 'the runner refused a batch the accounting admitted');
  assert.deepEqual(out.map((o) => o.reason), ['length', 'length', 'length', 'length']);
});

test('mock model: prefix cache on/off, paged/contiguous, fifo and static give identical text for requests sharing system prompts', async () => {
  // The mock's tokens hash each sequence's whole KV history, so a hit copied from the wrong owner
  // or a stale range would change the text.
  const systems = [longPrompt('sys-a', 80), longPrompt('sys-b', 60)];
  const jobs = Array.from({ length: 10 }, (_, i) => ({ prompt: `${systems[i % 2]!} user turn ${i}`, maxTokens: 12 + i, temperature: i % 3 === 0 ? 0.7 : 0, seed: i }));
  const configs: SchedulerConfig[] = [
    { scheduler: 'fifo' },
    { scheduler: 'continuous', prefixCache: true },
    { scheduler: 'continuous', prefixCache: false },
    { scheduler: 'continuous', kv: 'contiguous' },
    { scheduler: 'static', staticBatchSize: 3 },
  ];
  const results: string[][] = [];
  for (const config of configs) {
    const engine = makeEngine(new MockRunner({ cost: { speed: 0 }, contextTokens: 4096, maxSequences: 8 }), config);
    const sequential: string[] = [];
    for (const job of jobs) sequential.push((await runJobs(engine, [job]))[0]!.text);
    const together = (await runJobs(engine, jobs)).map((o) => o.text);
    if (config.prefixCache === true) assert.ok((engine.stats().scheduler.kv.prefixCache?.hitTokens ?? 0) > 500, 'the cache was used');
    results.push([...sequential, ...together]);
    await engine.stop();
  }
  assert.equal(new Set(results[0]!.slice(0, jobs.length)).size, jobs.length, 'every job has its own text');
  results.slice(1).forEach((r, i) => assert.deepEqual(r, results[0], `${JSON.stringify(configs[i + 1])} changed the text`));
});

test('decode-first: every decoding request gets its token in every step, and prompt tokens per step stay under the prefill budget', async () => {
  // Prefill budget = step budget, as in the measured stall: only the order protects decodes.
  const runner = new MockRunner({ cost: { speed: 0 }, maxBatchTokens: 64 });
  const s = createScheduler({ scheduler: 'continuous', prefillChunkTokens: 64, maxOutputTokens: 64, prefixCache: false }, runner.info);
  const out: Outcome[] = [];
  for (let i = 0; i < 4; i++) s.add(req(runner, `early-${i}`, `early ${i}`, 60, 0, out));
  let stalls = 0;
  let promptSteps = 0;
  for (let step = 0; s.numUnfinished > 0 && step < 2000; step++) {
    if (step === 3) for (let i = 0; i < 6; i++) s.add(req(runner, `long-${i}`, longPrompt(`long ${i}`, 150), 4, 3, out));
    const decoding = out.filter((o) => o.reason === null && o.request.numComputedTokens > 0 && o.request.numComputedTokens === o.request.numTokens - 1).map((o) => o.request.id);
    await stepOnce(s, runner, step, (plan) => {
      const ids = new Set(plan.scheduled.map((x) => x.request.id));
      stalls += decoding.filter((id) => !ids.has(id)).length;
      const prompt = plan.scheduled.filter((x) => x.numNewTokens > 1).reduce((a, x) => a + x.numNewTokens, 0);
      assert.ok(prompt <= 64, `step ${step} carried ${prompt} prompt tokens`);
      if (prompt > 0) promptSteps++;
    });
  }
  assert.ok(promptSteps > 10, 'the long prompts were chunked over many steps');
  assert.equal(stalls, 0, 'a decoding request was left out of a step');
});

test('cacheMaxFraction trims idle cached prefixes down to the cap; 1 keeps them', async () => {
  const run = async (cacheMaxFraction: number) => {
    const runner = new MockRunner({ cost: { speed: 0 }, contextTokens: 4096, maxSequences: 16 });
    const engine = makeEngine(runner, { scheduler: 'continuous', cacheMaxFraction, cacheRetain: 'all' });
    await runJobs(engine, Array.from({ length: 8 }, (_, i) => ({ prompt: longPrompt(`distinct ${i}`, 60), maxTokens: 4 })));
    const kv = engine.stats().scheduler.kv;
    engine.scheduler.checkInvariants();
    await engine.stop();
    return { used: kv.numBlocks - kv.numFreeBlocks, numBlocks: kv.numBlocks, cells: runner.numUsedCells };
  };
  const keep = await run(1);
  const capped = await run(0.1);
  assert.ok(keep.used > 0.1 * keep.numBlocks, `the uncapped cache keeps ${keep.used} blocks`);
  assert.ok(capped.used <= Math.floor(0.1 * capped.numBlocks), `the capped cache keeps ${capped.used} of ${capped.numBlocks} blocks`);
  assert.ok(capped.cells < keep.cells, 'llama-side cells are released too');
});

test('beside a decoding request, prompt chunks align decode plus prompt rows to 64, or the prompt rows alone where the runner computes decoding rows apart', async () => {
  const chunksBeside = async (decodeRowsApart: boolean): Promise<{ chunks: number[]; rows: number[] }> => {
    const runner = new MockRunner({ cost: { speed: 0 }, contextTokens: 4096, maxSequences: 4, maxBatchTokens: 2048 });
    const s = createScheduler({ scheduler: 'continuous', maxOutputTokens: 64, prefillChunkTokens: 256 }, { ...runner.info, decodeRowsApart }) as BatchScheduler;
    const out: Outcome[] = [];
    const at = (t: number) => ({ runner, now: () => t }) as unknown as Parameters<typeof makeRequest>[0];
    const word = (k: number, n: number): number[] => [1, ...Array.from({ length: n - 1 }, (_, i) => 259 + ((k * 31 + i * 7) % 150))];
    s.add(makeRequest(at(0), { prompt: word(1, 40), maxTokens: 60 }, 'X', out));
    await stepOnce(s, runner, 0); // X's prompt, alone: then it decodes
    s.add(makeRequest(at(1), { prompt: word(2, 600), maxTokens: 4 }, 'Y', out));
    const chunks: number[] = [];
    const rows: number[] = [];
    for (let t = 1; t < 10; t++) {
      const step = await stepOnce(s, runner, t);
      const y = step.scheduled.find((x) => x.request.id === 'Y');
      if (y === undefined || y.numNewTokens === 1) break;
      chunks.push(y.numNewTokens);
      rows.push(step.scheduled.reduce((a, x) => a + x.numNewTokens, 0));
    }
    return { chunks, rows };
  };
  assert.deepEqual(await chunksBeside(false), { chunks: [255, 255, 90], rows: [256, 256, 91] });
  assert.deepEqual(await chunksBeside(true), { chunks: [256, 256, 88], rows: [257, 257, 89] });
});
