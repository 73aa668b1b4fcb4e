// n > 1 through fork: the prompt is computed once (P − 1 tokens by the first choice, then one each),
// the other choices share its cells (seq_cp; copy-on-write in the block accounting), and each
// choice's greedy text equals an n = 1 run of the same request. Sampled choices differ (seed + i).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { request } from 'undici';
import type { StepRecord } from '../../src/engine/step-record.ts';
import { startTestServer } from '../helpers/headroom.ts';

/** A prompt of exactly `n` tokens for the mock tokenizer (BOS + word pieces). */
const promptIds = (n: number): number[] => [1, ...Array.from({ length: n - 1 }, (_, i) => 260 + ((i * 7) % 60))];

interface Completion {
  choices: { index: number; text: string; finish_reason: string }[];
  usage: { prompt_tokens: number; completion_tokens: number };
}

for (const prefixCache of [false, true]) {
  test(`n=3: three choices, the prompt computed once, copy-on-write counted, greedy texts equal n=1 runs (prefix cache ${prefixCache ? 'on' : 'off'})`, async () => {
    const server = await startTestServer({ scheduler: { scheduler: 'continuous', prefixCache, prefillChunkTokens: 64 } });
    const steps: StepRecord[] = [];
    server.headroom.engine.onStep((r) => steps.push(r));
    const P = 150; // (P − 1) % 16 ≠ 0: the last shared block is partial, so each fork copies it on write
    const post = async (body: object): Promise<Completion> => {
      const res = await request(`${server.url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'headroom-mock', max_tokens: 12, temperature: 0, ...body }) });
      assert.equal(res.statusCode, 200);
      return (await res.body.json()) as Completion;
    };
    try {
      const cow0 = server.headroom.engine.stats().scheduler.kv.numCopyOnWrite;
      const three = await post({ prompt: promptIds(P), n: 3 });
      const promptTokens = steps.reduce((n, r) => n + r.numPromptTokens, 0);
      assert.deepEqual(three.choices.map((c) => c.index), [0, 1, 2]);
      assert.equal(three.usage.prompt_tokens, P, 'the prompt is billed once');
      assert.equal(three.usage.completion_tokens, 36);
      assert.equal(promptTokens, P - 1 + 3, `prompt tokens computed: ${promptTokens} (three separate requests would compute ${3 * P})`);
      assert.equal(server.headroom.engine.stats().scheduler.kv.numCopyOnWrite - cow0, 2, 'each fork copied the shared partial block on write');

      const one = await post({ prompt: promptIds(P), n: 1 });
      for (const c of three.choices) assert.equal(c.text, one.choices[0]!.text, `choice ${c.index}: greedy text equals the n=1 run`);

      const sampled = await post({ prompt: promptIds(P), n: 3, temperature: 0.9, seed: 5 });
      assert.equal(new Set(sampled.choices.map((c) => c.text)).size, 3, 'sampled choices differ (seed + i)');
      const stats = server.headroom.engine.stats();
      assert.equal(stats.scheduler.numRunning + stats.scheduler.numWaiting, 0);
      server.headroom.engine.scheduler.checkInvariants();
    } finally {
      await server.close();
    }
  });
}

test('n=4 streamed: every choice streams with its index and ends, then [DONE]', async () => {
  const server = await startTestServer({ scheduler: { scheduler: 'continuous' }, mock: { cost: { speed: 1 } } });
  try {
    const res = await request(`${server.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'headroom-mock', messages: [{ role: 'user', content: 'the river and the stone' }], max_tokens: 8, n: 4, stream: true }),
    });
    const text = await res.body.text();
    const frames = text.split('\n\n').filter((f) => f.startsWith('data: ') && f !== 'data: [DONE]').map((f) => JSON.parse(f.slice(6)) as { choices: { index: number; finish_reason: string | null }[] });
    const finished = frames.flatMap((f) => f.choices).filter((c) => c.finish_reason !== null).map((c) => c.index).sort();
    assert.deepEqual(finished, [0, 1, 2, 3]);
    assert.ok(text.endsWith('data: [DONE]\n\n'));
  } finally {
    await server.close();
  }
});
