// --probe-port: /health, /ready and /metrics on a port of their own, through the same routes and
// hooks as the API port; nothing else is served there, and closing the server closes it too.
// (That a probe there is not stuck behind a crowd of API clients is test/deploy/burst.test.ts.)
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { request } from 'undici';
import { serverConfig } from '../../src/api/config.ts';
import type { TestServer } from '../helpers/headroom.ts';
import { startTestServer } from '../helpers/headroom.ts';
import { startTestGateway } from '../helpers/gateway.ts';

let server: TestServer;
let probes: string;

before(async () => {
  server = await startTestServer({ server: { probePort: 0 } });
  probes = server.headroom.probes?.address ?? assert.fail('no probe address after start');
});
after(() => server.close());

async function get(base: string, path: string, method: 'GET' | 'POST' = 'GET'): Promise<{ status: number; body: string; headers: Record<string, unknown> }> {
  const r = await request(`${base}${path}`, { method, ...(method === 'POST' ? { body: '{}', headers: { 'content-type': 'application/json' } } : {}) });
  return { status: r.statusCode, body: await r.body.text(), headers: r.headers };
}

test('the probe port is its own port and answers /health, /ready and /metrics as the API port does', async () => {
  assert.notEqual(new URL(probes).port, new URL(server.url).port);
  for (const path of ['/health', '/ready', '/metrics']) {
    const [p, a] = [await get(probes, path), await get(server.url, path)];
    assert.equal(p.status, 200, `${path} on the probe port: ${p.body}`);
    assert.equal(p.status, a.status, path);
    assert.equal(typeof p.headers['x-request-id'], 'string', `${path}: the same hooks run (a request id)`);
  }
  assert.deepEqual(JSON.parse((await get(probes, '/ready')).body), JSON.parse((await get(server.url, '/ready')).body));
  assert.match((await get(probes, '/metrics')).body, /^headroom_/m);
});

test('everything else is a 404 in the OpenAI shape on the probe port, and still served on the API port', async () => {
  for (const [method, path] of [['GET', '/v1/models'], ['POST', '/v1/chat/completions'], ['POST', '/v1/completions'], ['GET', '/stats'], ['GET', '/dashboard'], ['GET', '/nope']] as const) {
    const r = await get(probes, path, method);
    assert.equal(r.status, 404, `${method} ${path}: ${r.body}`);
    const e = (JSON.parse(r.body) as { error: { code: string; message: string } }).error;
    assert.equal(e.code, 'route_not_found', `${method} ${path}`);
    assert.match(e.message, /API port/, `${method} ${path}`);
  }
  assert.equal((await get(server.url, '/v1/models')).status, 200);
  const stats = await get(server.url, '/stats');
  assert.equal(stats.status, 200);
  assert.equal((JSON.parse(stats.body) as { probes: string }).probes, probes, '/stats names the probe address');
});

test('closing the server closes the probe port', async () => {
  const s = await startTestServer({ server: { probePort: 0 } });
  const url = s.headroom.probes!.address!;
  assert.equal((await get(url, '/health')).status, 200);
  await s.close();
  await assert.rejects(get(url, '/health'), /ECONNREFUSED/);
});

test('gateway mode has the probe port too', async () => {
  const upstream = await startTestServer();
  const gw = await startTestGateway([upstream.url], { server: { probePort: 0 } });
  try {
    const url = gw.gateway.probes!.address!;
    assert.equal((await get(url, '/health')).status, 200);
    assert.equal((await get(url, '/v1/models')).status, 404);
    assert.equal((await get(gw.url, '/v1/models')).status, 200);
  } finally {
    await gw.close();
    await upstream.close();
  }
});

test('a probe port must be a port, and not the API port', () => {
  assert.throws(() => serverConfig({ port: 8000, probePort: 8000 }), /probePort to differ from port/);
  assert.throws(() => serverConfig({ probePort: 70_000 }), /probePort in \[0, 65535\]/);
  assert.equal(serverConfig({ port: 0, probePort: 0 }).probePort, 0);
  assert.equal(serverConfig().probePort, null);
});
