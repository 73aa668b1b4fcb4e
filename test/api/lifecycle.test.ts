// The server listens before the model is loaded: meanwhile /health answers (loading: true),
// /ready is 503 and generation is 503 `loading` with Retry-After; once loaded and warm, all is served.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { request } from 'undici';
import { serverConfig } from '../../src/api/config.ts';
import { Headroom } from '../../src/app.ts';
import { MockRunner } from '../../src/engine/runner/mock/mock-runner.ts';
import type { Runner } from '../../src/engine/runner/runner.ts';

test('listen first: /health answers and /ready and generation are 503 until the model is loaded and warm', async () => {
  let release: (r: Runner) => void = () => undefined;
  const loading = new Promise<Runner>((r) => (release = r));
  const h = new Headroom({ runner: () => loading, server: serverConfig({ host: '127.0.0.1', port: 0 }), scheduler: { scheduler: 'fifo' }, maxQueuedRequests: 8 });
  const url = await h.listen();
  const loaded = h.load();
  try {
    const health = await request(`${url}/health`);
    assert.equal(health.statusCode, 200);
    assert.deepEqual(await health.body.json(), { status: 'ok', loading: true, draining: false, failure: null });
    const ready = await request(`${url}/ready`);
    assert.equal(ready.statusCode, 503);
    await ready.body.dump();
    const gen = await request(`${url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'headroom-mock', prompt: 'hi', max_tokens: 2 }) });
    assert.equal(gen.statusCode, 503);
    assert.equal(gen.headers['retry-after'], '1');
    assert.equal(((await gen.body.json()) as { error: { code: string } }).error.code, 'loading');
    const models = await request(`${url}/v1/models`);
    assert.equal(models.statusCode, 503);
    await models.body.dump();

    release(new MockRunner({ cost: { speed: 0 } }));
    await loaded;
    assert.equal((await request(`${url}/ready`)).statusCode, 200);
    const ok = await request(`${url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'headroom-mock', prompt: 'hi', max_tokens: 2 }) });
    assert.equal(ok.statusCode, 200);
    await ok.body.dump();
  } finally {
    await h.close();
  }
});
