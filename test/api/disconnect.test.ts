// A client that disconnects mid-stream aborts its request: the engine drops it and returns to its
// idle baseline (nothing waiting or running, every sequence id free, no KV cell held).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { startTestServer, waitForIdle } from '../helpers/headroom.ts';
import { readThenHangUp } from '../helpers/sse.ts';
import type { SchedulerName } from '../../src/engine/scheduler/factory.ts';
import { SCHEDULERS } from '../helpers/schedulers.ts';
import type { MockRunner } from '../../src/engine/runner/mock/mock-runner.ts';

async function eventually(cond: () => boolean, what: string, timeoutMs = 3000): Promise<void> {
  const t0 = Date.now();
  while (!cond()) {
    if (Date.now() - t0 > timeoutMs) assert.fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

type Config = { scheduler: SchedulerName; prefixCache?: boolean };
const CONFIGS = SCHEDULERS.flatMap((name): Config[] => {
  const scheduler = name;
  return scheduler === 'fifo' ? [{ scheduler }] : [{ scheduler, prefixCache: false }, { scheduler, prefixCache: true }];
});

for (const config of CONFIGS) {
  test(`disconnects mid-stream return the engine to its idle baseline (${JSON.stringify(config)})`, async () => {
    const server = await startTestServer({ scheduler: config, mock: { cost: { speed: 1 } } });
    const runner = server.runner as MockRunner;
    try {
      const before = server.headroom.engine.stats().scheduler;
      const body = { model: 'headroom-mock', prompt: 'a long story about the river', max_tokens: 800, ignore_eos: true };
      // Several streams hang up at different points, one non-streamed request's client leaves too.
      const hangups = await Promise.all([
        readThenHangUp(server.url, body, 3),
        readThenHangUp(server.url, body, 10),
        readThenHangUp(server.url, body, 25),
        readThenHangUp(server.url, body, 150, false),
      ]);
      assert.ok(hangups[0] >= 3 && hangups[2] >= 25, 'the streams were mid-flight when the clients left');
      await waitForIdle(server.headroom);
      const after = (): ReturnType<typeof server.headroom.engine.stats>['scheduler'] => server.headroom.engine.stats().scheduler;
      if (config.prefixCache === true) {
        // The baseline of a cache is what it keeps: no request holds anything, the cached prompt
        // holds its blocks and one owner sequence, and llama-side cells stay within those blocks.
        await eventually(() => runner.numUsedCells <= (after().kv.numBlocks - after().kv.numFreeBlocks) * after().kv.blockSize, 'cells beyond the cached blocks to be released');
        assert.equal(after().kv.numFreeBlocks, after().kv.numBlocks - Math.ceil((runner.numUsedCells) / after().kv.blockSize));
        assert.equal(after().numFreeSeqIds, before.numFreeSeqIds - 1, 'only the cache owner holds a sequence id');
      } else {
        await eventually(() => runner.numUsedCells === 0, 'the KV cells of aborted sequences to be released');
        assert.equal(after().numFreeSeqIds, before.numFreeSeqIds);
        assert.equal(after().kv.numFreeBlocks, before.kv.numFreeBlocks);
      }
      assert.equal(after().numRunning, 0);
      assert.equal(after().numWaiting, 0);
      server.headroom.engine.scheduler.checkInvariants();
      // Each aborted request stopped long before its 800 tokens: the engine did not keep generating.
      assert.ok(server.headroom.engine.stats().numSteps < 4 * 800, `engine ran ${server.headroom.engine.stats().numSteps} steps`);
    } finally {
      await server.close();
    }
  });
}
