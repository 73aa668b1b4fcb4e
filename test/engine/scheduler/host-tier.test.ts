// The prefix cache's host tier through the engine, on the mock runner, whose tokens hash each
// sequence's whole KV history (so a wrong or partial restore changes them): a shared document's
// second occurrence is placed back from host memory instead of recomputed, and every request
// generates exactly what it does with the tier off; a conversation's next turn takes the last
// turn's whole sequence back; with no room in host memory nothing is kept.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MockRunner } from '../../../src/engine/runner/mock/mock-runner.ts';
import type { SchedulerConfig } from '../../../src/engine/scheduler/factory.ts';
import { makeEngine, runJobs } from '../../helpers/engine-driver.ts';
import type { Job } from '../../helpers/engine-driver.ts';

const words = (seed: number, n: number): number[] => Array.from({ length: n }, (_, i) => 259 + ((seed * 7919 + i * 31 + ((i * i) % 13)) % 150));
const DOC = [1, ...words(1, 600)];
/** One document three times with different questions, then an unrelated prompt. */
const DOC_JOBS: readonly Job[] = [
  { prompt: [...DOC, ...words(2, 40)], maxTokens: 24 },
  { prompt: [...DOC, ...words(3, 30)], maxTokens: 24 },
  { prompt: [...DOC, ...words(4, 50)], maxTokens: 24 },
  { prompt: [1, ...words(5, 300)], maxTokens: 8 },
];

async function serve(config: SchedulerConfig, jobs: readonly Job[]): Promise<{ tokens: number[][]; cached: number[]; host: unknown; poolNodes: number[] }> {
  const engine = makeEngine(new MockRunner({ cost: { speed: 0 }, contextTokens: 4096, maxSequences: 4, maxBatchTokens: 512 }), config);
  const tokens: number[][] = [];
  const cached: number[] = [];
  const poolNodes: number[] = [];
  // One at a time: each request finds what the ones before it left.
  for (const job of jobs) {
    const [o] = await runJobs(engine, [job]);
    tokens.push(o!.tokens);
    cached.push(o!.request.numCachedTokens);
    poolNodes.push(engine.stats().scheduler.kv.prefixCache?.numNodes ?? 0);
  }
  const host = engine.stats().scheduler.kv.prefixCache?.host ?? null;
  await engine.stop();
  return { tokens, cached, host, poolNodes };
}

test('host tier: a document\'s second occurrence is placed back, and every request generates what it does without the tier', async () => {
  const off = await serve({ scheduler: 'continuous' }, DOC_JOBS);
  const on = await serve({ scheduler: 'continuous', hostTierTokens: 8192 }, DOC_JOBS);
  assert.deepEqual(on.tokens, off.tokens, 'the same tokens with and without the host tier');
  // Without the tier the pool keeps a prompt only once it has been seen twice (the doorkeeper):
  // the second occurrence is computed again, the third hits.
  assert.deepEqual(off.cached.map((c) => c >= 592), [false, false, true, false]);
  // With it, the second occurrence already comes back from host memory (whole 16-token blocks of the document).
  assert.equal(on.cached[0], 0);
  assert.ok(on.cached[1]! >= 592 && on.cached[2]! >= 592, `cached tokens ${on.cached.join(', ')}`);
  assert.equal(on.cached[3], 0);
  assert.deepEqual(on.host, { numEntries: 4, numTokens: (641 + 23) + (631 + 23) + (651 + 23) + (301 + 7), capacityTokens: 8192, numSaves: 4, numLoads: 2, hitTokens: on.cached[1]! + on.cached[2]! });
});

test('host tier with --cache-max-fraction 0: nothing idle stays in the pool, every later occurrence comes back from host memory', async () => {
  // Retaining every prompt, the pool would keep each one and hit the document there.
  const off = await serve({ scheduler: 'continuous' }, DOC_JOBS);
  const kept = await serve({ scheduler: 'continuous', hostTierTokens: 8192, cacheRetain: 'all', cacheMaxFraction: 1 }, DOC_JOBS);
  const lean = await serve({ scheduler: 'continuous', hostTierTokens: 8192, cacheRetain: 'all', cacheMaxFraction: 0 }, DOC_JOBS);
  assert.deepEqual(lean.tokens, off.tokens, 'the same tokens as with neither');
  assert.deepEqual(lean.poolNodes, [0, 0, 0, 0], 'the pool keeps no cached prefix once its request is gone');
  assert.ok(kept.poolNodes.every((n) => n > 0), `without the cap the pool keeps them (${kept.poolNodes.join(', ')})`);
  assert.equal((kept.host as { numLoads: number }).numLoads, 0, 'and hits them there');
  assert.equal(lean.cached[0], 0);
  assert.ok(lean.cached[1]! >= 592 && lean.cached[2]! >= 592, `cached tokens ${lean.cached.join(', ')}`);
  assert.equal((lean.host as { numLoads: number }).numLoads, 2, 'both later occurrences placed back from host memory');
});

test('host tier: a conversation\'s next turn takes the last turn back whole; the superseded entry is dropped', async () => {
  const turn1: Job = { prompt: [...DOC, ...words(6, 20)], maxTokens: 32 };
  const first = await serve({ scheduler: 'continuous', hostTierTokens: 8192 }, [turn1]);
  const answer = first.tokens[0]!;
  const turn2: Job = { prompt: [...(turn1.prompt as number[]), ...answer, ...words(7, 25)], maxTokens: 16 };
  const off = await serve({ scheduler: 'continuous' }, [turn1, turn2]);
  const on = await serve({ scheduler: 'continuous', hostTierTokens: 8192 }, [turn1, turn2]);
  assert.deepEqual(on.tokens, off.tokens);
  // Turn 1's sequence is its prompt and all but its last output token: 621 + 31 = 652, block-aligned 640.
  assert.equal(on.cached[1], 640);
  assert.equal((on.host as { numEntries: number }).numEntries, 1, 'turn 2 extends turn 1: one entry left');
});

test('host tier: a capacity below the shortest sequence keeps nothing and changes nothing', async () => {
  const jobs: Job[] = [{ prompt: [...DOC, ...words(2, 40)], maxTokens: 8 }, { prompt: [...DOC, ...words(3, 30)], maxTokens: 8 }];
  const off = await serve({ scheduler: 'continuous' }, jobs);
  const tiny = await serve({ scheduler: 'continuous', hostTierTokens: 100 }, jobs);
  assert.deepEqual(tiny.tokens, off.tokens);
  assert.deepEqual(tiny.cached, off.cached);
  assert.deepEqual(tiny.host, { numEntries: 0, numTokens: 0, capacityTokens: 100, numSaves: 0, numLoads: 0, hitTokens: 0 });
});
