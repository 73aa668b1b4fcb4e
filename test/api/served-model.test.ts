// --served-model-name: the model answers to each alias (and only to them), /v1/models lists them,
// responses echo the name the request asked for, and metrics label the first.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { request } from 'undici';
import { serverConfig } from '../../src/api/config.ts';
import { startOpsServer } from './ops-server.ts';

const complete = (url: string, model: string, stream = false) =>
  request(`${url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 2, stream }) });

test('aliases: listed, accepted, echoed; the file stem is not a name any more', async () => {
  const s = await startOpsServer({ server: { servedModelNames: ['gpt-4o-mini', 'org/tiny-chat'] } });
  try {
    const models = (await (await request(`${s.url}/v1/models`)).body.json()) as { data: { id: string; root: string }[] };
    assert.deepEqual(models.data.map((m) => m.id), ['gpt-4o-mini', 'org/tiny-chat']);
    assert.equal(models.data[0]!.root, 'headroom-mock');
    for (const name of ['gpt-4o-mini', 'org/tiny-chat']) {
      const r = await complete(s.url, name);
      const body = (await r.body.json()) as { model: string };
      assert.equal(r.statusCode, 200);
      assert.equal(body.model, name);
    }
    const streamed = await (await complete(s.url, 'org/tiny-chat', true)).body.text();
    assert.match(streamed, /"model":"org\/tiny-chat"/);
    const stem = await complete(s.url, 'headroom-mock');
    const e = (await stem.body.json()) as { error: { code: string; param: string; message: string } };
    assert.equal(stem.statusCode, 404);
    assert.deepEqual([e.error.code, e.error.param], ['model_not_found', 'model']);
    assert.match(e.error.message, /'gpt-4o-mini', 'org\/tiny-chat'/);
    const metrics = await (await request(`${s.url}/metrics`)).body.text();
    assert.match(metrics, /vllm:num_requests_running\{model_name="gpt-4o-mini"\}/);
  } finally {
    await s.close();
  }
});

test('without aliases the model file stem is the one name', async () => {
  const s = await startOpsServer();
  try {
    const models = (await (await request(`${s.url}/v1/models`)).body.json()) as { data: { id: string }[] };
    assert.deepEqual(models.data.map((m) => m.id), ['headroom-mock']);
  } finally {
    await s.close();
  }
});

test('names are validated once, at configuration', () => {
  assert.throws(() => serverConfig({ servedModelNames: ['a', 'a'] }), /distinct served model names/);
  assert.throws(() => serverConfig({ servedModelNames: ['has space'] }), /printable characters without spaces/);
  assert.throws(() => serverConfig({ corsOrigins: ['app.example.com/path'] }), /CORS origin/);
  assert.throws(() => serverConfig({ logLevel: 'loud' as never }), /logLevel/);
});
