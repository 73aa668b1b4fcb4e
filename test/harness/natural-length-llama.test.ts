// Natural-length requests on the real llama runner (the tiny random-weights test model, one
// thread): the harness learns the EOS token and vocabulary size over HTTP, and a small sample of
// chat-natural requests ends by EOS (finish_reason "stop") at lengths that differ.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { LlamaRunner } from '../../src/engine/runner/llama/llama-runner.ts';
import { probeEos } from '../../src/harness/eos-probe.ts';
import type { EosTarget } from '../../src/harness/natural-length.ts';
import { Workload } from '../../src/harness/workloads.ts';
import { requestBody } from '../../src/harness/client.ts';
import { openTinyRunner } from '../engine/runner/llama/fixture.ts';
import type { TestServer } from '../helpers/headroom.ts';
import { startTestServer } from '../helpers/headroom.ts';

let runner: LlamaRunner;
let server: TestServer;
before(async () => {
  runner = await openTinyRunner({ threads: 1 });
  server = await startTestServer({ runner });
});
after(async () => {
  await server.close();
});

async function probe(): Promise<EosTarget> {
  const eos = await probeEos({ url: server.url, path: '/v1/chat/completions', model: runner.info.modelId });
  return typeof eos === 'string' ? assert.fail(eos) : eos;
}

test('the probe learns the vocabulary size and a token that ends generation from the server alone', async () => {
  const eos = await probe();
  assert.equal(eos.vocabSize, runner.info.vocabSize);
  assert.ok(runner.tokenizer.isEog(eos.eosTokenId), `token ${eos.eosTokenId} ends generation`);
});

test('chat-natural requests end by EOS at varying lengths', async () => {
  const eos = await probe();
  const w = new Workload({ kind: 'chat-natural', seed: 1, tokensPerWord: 1, contextTokens: 0, mix: [1, 1, 1], promptTokens: 64, outputTokens: 128, eos, naturalMeanTokens: 16 });
  const client = { origin: server.url, path: '/v1/chat/completions', model: runner.info.modelId, timeoutMs: 60_000, sloHeaderMs: null, ignoreEos: true };
  const results = await Promise.all(
    Array.from({ length: 8 }, async () => {
      // The harness's own body, asked for whole instead of streamed so the finish reason is one field.
      const body = { ...(JSON.parse(requestBody(w.next(), client)) as Record<string, unknown>), stream: false, stream_options: undefined };
      const res = await fetch(server.url + '/v1/chat/completions', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
      const j = (await res.json()) as { choices: Array<{ finish_reason: string }>; usage: { completion_tokens: number } };
      assert.equal(res.status, 200, JSON.stringify(j));
      return { finish: j.choices[0]?.finish_reason, length: j.usage.completion_tokens };
    }),
  );
  assert.deepEqual(results.map((r) => r.finish), results.map(() => 'stop'), JSON.stringify(results));
  assert.ok(new Set(results.map((r) => r.length)).size >= 4, `lengths vary: ${results.map((r) => r.length).join(', ')}`);
});
