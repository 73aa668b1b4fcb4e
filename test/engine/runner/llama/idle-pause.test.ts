// idle(): when the engine has nothing to compute, the llama runner pauses ggml's thread pool, whose
// threads otherwise poll for the next graph for a while after the last one (ggml's default level:
// ~130 ms of a core on a 2-core machine, docs/per-token.md §12). The next decode must wake them:
// after a pause, steps run and give the tokens they give without one, inline and on the pool.
// A paused process is quiet: its CPU time over the next 300 ms stays far below the spin.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { LlamaRunner } from '../../../../src/engine/runner/llama/llama-runner.ts';
import { item, openTinyRunner, plan, promptOf, run } from './fixture.ts';

/** A greedy generation of `n` tokens on seq 0, pausing the pool before every step when `pause`. */
async function generate(runner: LlamaRunner, n: number, pause: boolean): Promise<number[]> {
  const prompt = promptOf(runner, 48);
  if (pause) runner.idle();
  let [tok] = await run(runner, plan([item(0, prompt, 0, true, true)]));
  const out = [tok!];
  for (let i = 0; i < n - 1; i++) {
    if (pause) runner.idle();
    [tok] = await run(runner, plan([item(0, [tok!], prompt.length + i)]));
    out.push(tok!);
  }
  await run(runner, plan([], [{ kind: 'remove', seqId: item(0, [], 0).seqId, p0: 0, p1: -1 }]));
  return out;
}

for (const inlineStepMs of [0, 50]) {
  test(`after idle() the next steps wake the pool and give the same tokens (inline-step-ms ${inlineStepMs})`, async () => {
    const runner = await openTinyRunner({ inlineStepMs });
    try {
      const plain = await generate(runner, 12, false);
      const paused = await generate(runner, 12, true);
      assert.deepEqual(paused, plain);
      assert.equal(runner.numPauses, 12, 'every idle() between steps paused the pool');
    } finally {
      await runner.close();
    }
  });
}

test('a paused pool stops spinning: the process stays nearly idle for the next 300 ms', async () => {
  const runner = await openTinyRunner();
  try {
    const cpuAfter = async (pause: boolean): Promise<number> => {
      await generate(runner, 8, false);
      if (pause) runner.idle();
      const c0 = process.cpuUsage();
      await new Promise((r) => setTimeout(r, 300));
      const c = process.cpuUsage(c0);
      return (c.user + c.system) / 1000;
    };
    const spinning = await cpuAfter(false);
    const paused = await cpuAfter(true);
    // Unpaused, a pool thread polls at full speed (~130 ms here on a quiet machine; less when other
    // work takes its core, so it is reported, not asserted). Paused, only the event loop's timer runs.
    console.log(`# CPU ms over 300 ms after a burst of steps: ${spinning.toFixed(1)} unpaused, ${paused.toFixed(1)} paused`);
    assert.ok(paused < 40, `paused, the process used ${paused.toFixed(1)} ms of CPU in 300 ms (a polling pool thread uses ~130)`);
  } finally {
    await runner.close();
  }
});

test('idle() after close() is a no-op', async () => {
  const runner = await openTinyRunner();
  await runner.close();
  runner.idle();
  assert.equal(runner.numPauses, 0);
});
