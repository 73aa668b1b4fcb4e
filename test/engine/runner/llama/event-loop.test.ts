// While a long prefill runs, the event loop stays free: llama_decode runs on a libuv worker
// thread (an N-API AsyncWorker). A 5 ms interval timer measures its own lateness; if decode ran
// on the JS thread, one timer would be late by a whole forward pass (hundreds of ms here). The
// bound is half the longest step, not a fixed time: a loaded shared machine stretches the steps
// and the timer's lateness alike (a fixed 250 ms failed at 279 ms there), while a blocked loop
// lags by about a whole step. The test checks that a step is long enough to tell, so it cannot
// pass vacuously on a very fast machine.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { item, openTinyRunner, plan, promptOf, run } from './fixture.ts';

/** Below this a step is too short to tell a free loop from a blocked one. */
const MIN_STEP_MS = 300;

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
    assert.ok(ticks >= totalMs / 25, `only ${ticks} timer ticks in ${totalMs.toFixed(0)} ms`);
    const lagBoundMs = longest / 2;
    assert.ok(maxLagMs < lagBoundMs, `timer lag ${maxLagMs.toFixed(1)} ms >= ${lagBoundMs.toFixed(0)} ms (half the longest step) during prefill`);
  } finally {
    await runner.close();
  }
});
