// While a long prefill runs, the event loop stays free: llama_decode runs on a libuv worker
// thread (an N-API AsyncWorker). A 5 ms interval timer measures its own lateness; if decode ran
// on the JS thread, one timer would be late by a whole forward pass (hundreds of ms here). The
// bound is generous for a shared 2-core machine (the model's 2 threads compete with the timer's
// thread), so the bound is a ratio, not a wall-clock number: the worst lag must stay under a quarter
// of the longest step (a loop blocked by the forward pass lags by the whole step), and a loaded
// machine, which stretches both, cannot break it. The test checks that a step is long enough to
// tell (a fast machine would make it vacuous).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { item, openTinyRunner, plan, promptOf, run } from './fixture.ts';

/** The worst timer lag, as a share of the longest step. */
const LAG_SHARE = 0.25;
/** A step shorter than this cannot tell a blocked loop from scheduling noise. */
const MIN_STEP_MS = 200;

test('a timer on the event loop fires on time during a long prefill', async (t) => {
  const runner = await openTinyRunner({ contextTokens: 8192, maxBatchTokens: 2048, maxSequences: 4 });
  try {
    const prompt = promptOf(runner, 2048);
    assert.equal(prompt.length, 2048);
    let maxLagMs = 0;
    let ticks = 0;
    let last = performance.now();
    const timer = setInterval(() => {
      const now = performance.now();
      maxLagMs = Math.max(maxLagMs, now - last - 5);
      last = now;
      ticks++;
    }, 5);
    const stepMs: number[] = [];
    const start = performance.now();
    try {
      for (let seq = 0; seq < 2; seq++) {
        const t0 = performance.now();
        await run(runner, plan([item(seq, prompt, 0, true, true)]));
        stepMs.push(performance.now() - t0);
      }
      // The gap since the last tick counts too: a blocked loop may not tick at all.
      maxLagMs = Math.max(maxLagMs, performance.now() - last - 5);
    } finally {
      clearInterval(timer);
    }
    const totalMs = performance.now() - start;
    const longest = Math.max(...stepMs);
    t.diagnostic(`steps ${stepMs.map((s) => s.toFixed(0)).join(', ')} ms; max timer lag ${maxLagMs.toFixed(1)} ms over ${ticks} ticks`);
    assert.ok(longest > MIN_STEP_MS, `a 2048-token step took only ${longest.toFixed(0)} ms: too fast for this test to tell`);
    assert.ok(ticks >= totalMs / 100, `only ${ticks} timer ticks in ${totalMs.toFixed(0)} ms`);
    assert.ok(maxLagMs < LAG_SHARE * longest, `timer lag ${maxLagMs.toFixed(1)} ms >= ${LAG_SHARE} of the longest step (${longest.toFixed(0)} ms) during prefill`);
  } finally {
    await runner.close();
  }
});
