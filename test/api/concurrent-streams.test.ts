// 20 concurrent streams each carry only their own tokens: every stream's text equals what the
// same request produces alone. Run against each scheduler that batches requests together.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { startTestServer } from '../helpers/headroom.ts';
import { streamCompletion } from '../helpers/sse.ts';
import { SCHEDULERS } from '../helpers/schedulers.ts';

for (const scheduler of SCHEDULERS) {
  test(`20 concurrent streams carry only their own tokens (${scheduler})`, async () => {
    const server = await startTestServer({ scheduler: { scheduler: scheduler }, mock: { cost: { speed: 0.2 } } });
    try {
      const bodies = Array.from({ length: 20 }, (_, i) => ({
        model: 'headroom-mock',
        prompt: `request number ${i}: ${'the river '.repeat(i + 1)}`,
        max_tokens: 12 + i,
        temperature: i % 2 === 0 ? 0 : 0.9,
        seed: 1000 + i,
        stream: true,
      }));
      const alone: string[] = [];
      for (const b of bodies) alone.push((await streamCompletion(server.url, b)).text);
      let maxHeld = 0;
      server.headroom.engine.onStep(() => (maxHeld = Math.max(maxHeld, server.headroom.engine.scheduler.numUnfinished)));
      const together = await Promise.all(bodies.map((b) => streamCompletion(server.url, b)));
      // The streams really did overlap: the engine held many of them at once.
      assert.ok(maxHeld >= 10, `expected the 20 streams to overlap, saw at most ${maxHeld} at once`);
      assert.ok(new Set(alone).size >= 18, 'prompts must yield distinct texts for the test to mean anything');
      together.forEach((r, i) => {
        assert.equal(r.text, alone[i], `stream ${i} carried someone else's tokens`);
        assert.equal(r.finishReason, 'length');
        assert.equal(r.chunks.every((c) => c.id === r.chunks[0]!.id), true, `stream ${i} mixed response ids`);
      });
    } finally {
      await server.close();
    }
  });
}
