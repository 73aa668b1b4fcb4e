// A throw anywhere in a step other than the runner call (schedule, update, a sink, an observer)
// breaks the bookkeeping: every held request fails with engine_failure, /health turns 503, new
// work is refused with 503 engine_unavailable, and the failure listener gets the error and the
// last step records (what serve logs before it exits).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { request } from 'undici';
import type { StepRecord } from '../../src/engine/step-record.ts';
import { SCHEDULERS } from '../helpers/schedulers.ts';
import { startTestServer } from '../helpers/headroom.ts';
import { streamCompletion } from '../helpers/sse.ts';

for (const scheduler of SCHEDULERS) {
  for (const where of ['schedule', 'update'] as const) {
    test(`a ${where}() that throws fails every held request and turns /health red (${scheduler})`, async () => {
      let fatal: { error: Error; steps: readonly StepRecord[] } | null = null;
      const server = await startTestServer({
        scheduler: { scheduler },
        mock: { cost: { speed: 1, decodeSeqMs: 5 } },
        onEngineFailure: (error, steps) => (fatal = { error, steps }),
      });
      const errors = console.error;
      console.error = () => undefined; // the step-record dump is expected here
      try {
        const s = server.headroom.engine.scheduler;
        const body = { model: 'headroom-mock', prompt: 'the queue and the server', max_tokens: 400 };
        const streams = Array.from({ length: 3 }, () => streamCompletion(server.url, { ...body, stream: true }));
        const whole = request(`${server.url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
        const t0 = Date.now();
        while (server.headroom.engine.stats().numSteps < 10 && Date.now() - t0 < 10_000) await new Promise((r) => setTimeout(r, 5));
        assert.equal(server.headroom.engine.numUnfinished, 4, 'all four are held when the bug strikes');
        const original = s[where].bind(s) as (...a: unknown[]) => unknown;
        (s as unknown as Record<string, unknown>)[where] = (...a: unknown[]) => {
          original(...a);
          throw new Error(`simulated ${where} bug`);
        };

        for (const r of await Promise.all(streams)) {
          assert.equal(r.status, 200);
          assert.ok(r.chunks.some((c) => (c as unknown as { error?: { code: string } }).error?.code === 'engine_failure'), 'the stream carries engine_failure');
          assert.ok(r.sawDone, 'and is closed with [DONE]');
        }
        const w = await whole;
        assert.equal(w.statusCode, 500);
        assert.equal(((await w.body.json()) as { error: { code: string } }).error.code, 'engine_failure');

        const health = await request(`${server.url}/health`);
        assert.equal(health.statusCode, 503);
        assert.match(((await health.body.json()) as { failure: string }).failure, new RegExp(`simulated ${where} bug`));
        assert.equal((await request(`${server.url}/ready`)).statusCode, 503);
        const late = await request(`${server.url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
        assert.equal(late.statusCode, 503);
        assert.equal(((await late.body.json()) as { error: { code: string } }).error.code, 'engine_unavailable');
        assert.ok(fatal !== null, 'the failure listener ran');
        const f = fatal as { error: Error; steps: readonly StepRecord[] };
        assert.match(f.error.message, new RegExp(`simulated ${where} bug`));
        assert.ok(f.steps.length >= 5, `the last step records come with it (got ${f.steps.length})`);
        assert.ok(f.steps.every((r, i) => i === 0 || r.index === f.steps[i - 1]!.index + 1), 'in order');
        assert.equal(server.headroom.engine.numUnfinished, 0);
      } finally {
        console.error = errors;
        await server.close();
      }
    });
  }
}
