// While a long prefill runs, the event loop stays free: llama_decode runs on a libuv worker
// thread (an N-API AsyncWorker). A 5 ms interval timer measures its own lateness; if decode ran
// on the JS thread, one timer would be late by a whole forward pass (hundreds of ms here). The
// bound is generous for a shared 2-core machine (the model's 2 threads compete with the timer's
// thread), and the test checks that a step really is much longer than the bound, so it cannot
// pass vacuously on a very fast machine.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { item, openTinyRunner, plan, promptOf, run } from './fixture.ts';

const LAG_BOUND_MS = 250;

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
    assert.ok(longest > 2 * LAG_BOUND_MS, `a 2048-token step took only ${longest.toFixed(0)} ms: too fast for this test to tell`);
    assert.ok(ticks >= totalMs / 25, `only ${ticks} timer ticks in ${totalMs.toFixed(0)} ms`);
    assert.ok(maxLagMs < LAG_BOUND_MS, `timer lag ${maxLagMs.toFixed(1)} ms >= ${LAG_BOUND_MS} ms during prefill`);
  } finally {
    await runner.close();
  }
});
