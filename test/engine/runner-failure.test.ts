// A runner that throws (a bug) or fails a step fails the requests of that step with an error the
// client sees (500 engine_failure, or an error event in a stream); the server keeps serving.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { request } from 'undici';
import { startTestServer } from '../helpers/headroom.ts';
import { streamCompletion } from '../helpers/sse.ts';
import { FlakyRunner } from '../helpers/flaky-runner.ts';


for (const scheduler of ['fifo', 'continuous'] as const) {
  test(`a failing runner step fails its requests cleanly and the server keeps serving (${scheduler})`, async () => {
    const runner = new FlakyRunner({ cost: { speed: 0 } });
    const server = await startTestServer({ runner, scheduler: { scheduler } });
    const body = { model: 'headroom-mock', prompt: 'hello there', max_tokens: 5 };
    try {
      for (const mode of ['throw', 'fail'] as const) {
        runner.failNext = mode;
        const res = await request(`${server.url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
        const json = (await res.body.json()) as { error: { code: string } };
        assert.equal(res.statusCode, 500, mode);
        assert.equal(json.error.code, 'engine_failure', mode);
        runner.failNext = mode;
        const s = await streamCompletion(server.url, { ...body, stream: true });
        assert.equal(s.status, 200);
        assert.ok(s.chunks.some((c) => (c as unknown as { error?: { code: string } }).error?.code === 'engine_failure'), `${mode}: the stream carries the error`);
        assert.ok(s.sawDone, 'the stream is closed properly');
      }
      const ok = await streamCompletion(server.url, { ...body, stream: true });
      assert.equal(ok.finishReason, 'length');
      assert.equal(server.headroom.engine.stats().numRunnerErrors, 2);
    } finally {
      await server.close();
    }
  });
}
