// CORS by flag: off by default; with --cors-origin, preflights are answered (without an API key)
// and responses — JSON, SSE, errors, 401 — carry Access-Control-Allow-Origin and expose
// x-request-id and Retry-After to scripts; other origins get no grant.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { request } from 'undici';
import { startOpsServer } from './ops-server.ts';

const ORIGIN = 'https://app.example.com';
const KEY = 'sk-browser-00000001';

const preflight = (url: string, origin: string) =>
  request(`${url}/v1/chat/completions`, { method: 'OPTIONS', headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization,content-type' } });

const chat = (url: string, origin: string, extra: Record<string, unknown> = {}, headers: Record<string, string> = { authorization: `Bearer ${KEY}` }) =>
  request(`${url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', origin, ...headers }, body: JSON.stringify({ model: 'headroom-mock', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2, ...extra }) });

test('off by default: no preflight answer, no CORS headers', async () => {
  const s = await startOpsServer();
  try {
    const p = await preflight(s.url, ORIGIN);
    await p.body.dump();
    assert.notEqual(p.statusCode, 204);
    assert.equal(p.headers['access-control-allow-origin'], undefined);
    const r = await chat(s.url, ORIGIN);
    await r.body.dump();
    assert.equal(r.headers['access-control-allow-origin'], undefined);
  } finally {
    await s.close();
  }
});

test('an allowed origin: preflight 204 without a key; JSON, SSE, 400 and 401 responses grant it and expose x-request-id and Retry-After', async () => {
  const s = await startOpsServer({ server: { corsOrigins: [ORIGIN] }, keys: [`${KEY} web`] });
  try {
    const p = await preflight(s.url, ORIGIN);
    await p.body.dump();
    assert.equal(p.statusCode, 204);
    assert.equal(p.headers['access-control-allow-origin'], ORIGIN);
    assert.match(String(p.headers['access-control-allow-methods']), /POST/);
    assert.match(String(p.headers['access-control-allow-headers']), /authorization/);

    const responses = {
      json: await chat(s.url, ORIGIN),
      sse: await chat(s.url, ORIGIN, { stream: true }),
      bad: await chat(s.url, ORIGIN, { max_tokens: -3 }),
      unauthorized: await chat(s.url, ORIGIN, {}, {}),
    };
    assert.deepEqual(Object.values(responses).map((r) => r.statusCode), [200, 200, 400, 401]);
    for (const [name, r] of Object.entries(responses)) {
      await r.body.dump();
      assert.equal(r.headers['access-control-allow-origin'], ORIGIN, name);
      const exposed = String(r.headers['access-control-expose-headers']).toLowerCase();
      assert.ok(exposed.includes('x-request-id') && exposed.includes('retry-after'), `${name}: ${exposed}`);
    }

    const other = await chat(s.url, 'https://evil.example.net');
    await other.body.dump();
    assert.equal(other.headers['access-control-allow-origin'], undefined, 'another origin gets no grant');
  } finally {
    await s.close();
  }
});

test('* allows any origin', async () => {
  const s = await startOpsServer({ server: { corsOrigins: ['*'] } });
  try {
    const r = await chat(s.url, 'https://anywhere.example.org', {}, {});
    await r.body.dump();
    assert.equal(r.statusCode, 200);
    assert.equal(r.headers['access-control-allow-origin'], '*');
  } finally {
    await s.close();
  }
});
