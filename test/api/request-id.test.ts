// x-request-id: a client's own id is kept when short and plain, otherwise replaced; every kind of
// response carries it back (JSON, SSE, 400, 401, 404, 405, 503 refusal, probes), and it is the id
// in the request's log line and its trace span. The completion's own id (chatcmpl-…) is unchanged.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { request } from 'undici';
import type { AdmissionController } from '../../src/admission/controller.ts';
import { refusal } from '../../src/backend/refusal.ts';
import { startOtlpStub } from '../obs/otlp-stub.ts';
import { startOpsServer, until } from './ops-server.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

const refuseAll: AdmissionController = {
  name: 'refuse-all',
  needsFeatures: false,
  decide: () => ({ admit: false, boundMs: 5000, reason: 'over_budget', memo: null, refusal: refusal('conformal') }),
  observe: () => undefined,
  state: () => ({}),
};

const post = (url: string, path: string, body: unknown, headers: Record<string, string> = {}) =>
  request(`${url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });

test('a client id comes back on every kind of response and is the log line id; the completion id is its own', async () => {
  const s = await startOpsServer({ server: { logLevel: 'debug' } }); // debug: the probe's line too
  try {
    const cases: { name: string; send: (id: string) => ReturnType<typeof request>; status: number }[] = [
      { name: 'json', send: (id) => post(s.url, '/v1/completions', { model: 'headroom-mock', prompt: 'x', max_tokens: 2 }, { 'x-request-id': id }), status: 200 },
      { name: 'sse', send: (id) => post(s.url, '/v1/chat/completions', { model: 'headroom-mock', messages: [{ role: 'user', content: 'x' }], max_tokens: 2, stream: true }, { 'x-request-id': id }), status: 200 },
      { name: '400', send: (id) => post(s.url, '/v1/completions', { model: 'headroom-mock', prompt: '' }, { 'x-request-id': id }), status: 400 },
      { name: '400 json', send: (id) => request(`${s.url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-request-id': id }, body: '{not json' }), status: 400 },
      { name: '404 model', send: (id) => post(s.url, '/v1/completions', { model: 'nope', prompt: 'x' }, { 'x-request-id': id }), status: 404 },
      { name: '404 route', send: (id) => request(`${s.url}/v2/anything`, { headers: { 'x-request-id': id } }), status: 404 },
      { name: '405', send: (id) => request(`${s.url}/v1/completions`, { headers: { 'x-request-id': id } }), status: 405 },
      { name: 'health', send: (id) => request(`${s.url}/health`, { headers: { 'x-request-id': id } }), status: 200 },
      { name: 'models', send: (id) => request(`${s.url}/v1/models`, { headers: { 'x-request-id': id } }), status: 200 },
    ];
    for (const [i, c] of cases.entries()) {
      const id = `client-${i}:trace/AB+c=`;
      const r = await c.send(id);
      const text = await r.body.text();
      assert.equal(r.statusCode, c.status, `${c.name}: ${text}`);
      assert.equal(r.headers['x-request-id'], id, c.name);
      if (c.name === 'json') assert.match((JSON.parse(text) as { id: string }).id, /^cmpl-/);
      if (c.name === 'sse') assert.match(text, /"id":"chatcmpl-/);
    }
    await until(() => s.requests().length === cases.length, 'a line per request');
    assert.deepEqual(s.requests().map((l) => l.request_id).sort(), cases.map((_, i) => `client-${i}:trace/AB+c=`).sort());
  } finally {
    await s.close();
  }
});

test('a missing, too long or odd id is replaced by a fresh UUID', async () => {
  const s = await startOpsServer();
  try {
    const ids = new Set<string>();
    for (const h of [undefined, 'x'.repeat(129), 'has space', 'new\\nline', 'quote"d', '']) {
      const r = await request(`${s.url}/health`, { headers: h === undefined ? {} : { 'x-request-id': h } });
      await r.body.dump();
      const id = r.headers['x-request-id'] as string;
      assert.match(id, UUID, `for ${JSON.stringify(h)}`);
      ids.add(id);
    }
    assert.equal(ids.size, 6, 'each fresh');
    const kept = await request(`${s.url}/health`, { headers: { 'x-request-id': 'y'.repeat(128) } });
    await kept.body.dump();
    assert.equal(kept.headers['x-request-id'], 'y'.repeat(128), '128 characters are kept');
  } finally {
    await s.close();
  }
});

test('503 refusals and 401s carry the id too', async () => {
  const s = await startOpsServer({ admission: refuseAll, keys: ['sk-test-user-0001 team-a'] });
  try {
    const refused = await post(s.url, '/v1/completions', { model: 'headroom-mock', prompt: 'x', max_tokens: 2 }, { 'x-request-id': 'refused-1', authorization: 'Bearer sk-test-user-0001' });
    await refused.body.dump();
    assert.equal(refused.statusCode, 503);
    assert.equal(refused.headers['x-request-id'], 'refused-1');
    const denied = await post(s.url, '/v1/completions', { model: 'headroom-mock', prompt: 'x' }, { 'x-request-id': 'denied-1' });
    await denied.body.dump();
    assert.equal(denied.statusCode, 401);
    assert.equal(denied.headers['x-request-id'], 'denied-1');
  } finally {
    await s.close();
  }
});

test('the request id is the trace span attribute http.request_id', async () => {
  const stub = await startOtlpStub();
  const s = await startOpsServer({ obs: { otelEndpoint: stub.url, tracing: { exportDelayMs: 20 } } });
  try {
    const r = await post(s.url, '/v1/completions', { model: 'headroom-mock', prompt: 'x', max_tokens: 2 }, { 'x-request-id': 'traced-7' });
    await r.body.dump();
    await until(() => stub.spans.some((x) => x.name === 'headroom.request'), 'the request span');
    const root = stub.spans.find((x) => x.name === 'headroom.request')!;
    assert.equal(root.attributes['http.request_id'], 'traced-7');
  } finally {
    await s.close();
    await stub.close();
  }
});
