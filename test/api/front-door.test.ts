// Front-door rules: budget headers inside bounds, `Connection: close` honoured on streams, a wrong
// method is 405 with Allow, and errors below the routes (bad framing, header overflow) come in the
// OpenAI error shape.
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { after, before, test } from 'node:test';
import { request } from 'undici';
import type { TestServer } from '../helpers/headroom.ts';
import { startTestServer, waitForIdle } from '../helpers/headroom.ts';

let server: TestServer;
let port: number;

before(async () => {
  server = await startTestServer({ server: { minSloMs: 500, sloMs: 10_000, maxSloMs: 60_000 } });
  port = Number(new URL(server.url).port);
});
after(() => server.close());

/** Sends raw bytes; resolves with everything received once the server closes (or after `waitMs`). */
function raw(bytes: string | Buffer, waitMs = 5000): Promise<{ text: string; closedByServer: boolean }> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1');
    let text = '';
    const timer = setTimeout(() => {
      s.destroy();
      resolve({ text, closedByServer: false });
    }, waitMs);
    s.on('data', (b) => (text += b.toString('utf8')));
    s.on('error', () => undefined);
    s.on('close', () => {
      clearTimeout(timer);
      resolve({ text, closedByServer: true });
    });
    s.on('connect', () => s.write(bytes));
  });
}

const chat = JSON.stringify({ model: 'headroom-mock', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 });

async function post(headers: Record<string, string>): Promise<{ status: number; body: { error?: { code: string; param: string | null } } }> {
  const res = await request(`${server.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: chat });
  return { status: res.statusCode, body: (await res.body.json()) as { error?: { code: string; param: string | null } } };
}

test('x-slo-ms below the minimum is refused at once (400, never queued); above the maximum 400; inside, served', async () => {
  const before = server.headroom.engine.stats().numSubmitted;
  for (const v of ['1', '499', '60001', '99999999999999999999', '-5', '1e3', '']) {
    const r = await post({ 'x-slo-ms': v });
    assert.equal(r.status, 400, `x-slo-ms ${v}`);
    assert.equal(r.body.error?.code, 'invalid_value');
    assert.equal(r.body.error?.param, 'x-slo-ms');
  }
  assert.equal(server.headroom.engine.stats().numSubmitted, before, 'a refused budget reached the engine');
  for (const v of ['500', '60000', '2000']) assert.equal((await post({ 'x-slo-ms': v })).status, 200, `x-slo-ms ${v}`);
});

const streamRequest = (connection: string): string => {
  const body = JSON.stringify({ model: 'headroom-mock', prompt: 'hi', max_tokens: 5, stream: true });
  return `POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: ${connection}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
};

test('Connection: close on a stream is honoured: the response says close and the server closes after [DONE]', async () => {
  const r = await raw(streamRequest('close'));
  const head = r.text.slice(0, r.text.indexOf('\r\n\r\n')).toLowerCase();
  assert.match(head, /^http\/1\.1 200/);
  assert.match(head, /\r\nconnection: close/, head);
  assert.doesNotMatch(head, /keep-alive/, head);
  assert.ok(r.text.includes('data: [DONE]'), 'the stream did not finish');
  assert.ok(r.closedByServer, 'the server kept the connection open');
  // And a keep-alive stream stays open (the control).
  const k = await raw(streamRequest('keep-alive'), 300);
  assert.ok(k.text.includes('data: [DONE]'));
  assert.match(k.text.toLowerCase(), /\r\nconnection: keep-alive/);
  assert.equal(k.closedByServer, false);
});

test('a wrong method on a known path is 405 with an Allow header, in the OpenAI shape', async () => {
  for (const [method, path, allow] of [['GET', '/v1/chat/completions', 'POST'], ['PUT', '/v1/completions', 'POST'], ['DELETE', '/v1/models', 'GET, HEAD'], ['POST', '/health', 'GET, HEAD']] as const) {
    const res = await request(`${server.url}${path}`, { method });
    const body = (await res.body.json()) as { error: { code: string; type: string } };
    assert.equal(res.statusCode, 405, `${method} ${path}`);
    assert.equal(res.headers['allow'], allow);
    assert.equal(body.error.code, 'method_not_allowed');
  }
  const nf = await request(`${server.url}/v2/nothing`);
  assert.equal(nf.statusCode, 404);
  assert.equal(((await nf.body.json()) as { error: { code: string } }).error.code, 'route_not_found');
});

function openAiError(text: string): { status: number; code: string; type: string } {
  const status = Number(/^HTTP\/1\.1 (\d+)/.exec(text)?.[1]);
  const body = JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4)) as { error: { code: string; type: string; message: string } };
  assert.equal(typeof body.error.message, 'string');
  return { status, code: body.error.code, type: body.error.type };
}

test('HTTP-layer errors use the OpenAI error shape: bad framing 400, header overflow 431, bad URL 400', async () => {
  const cases: [string, string | Buffer, number, string][] = [
    ['garbage request line', 'HELLO\r\n\r\n', 400, 'bad_request'],
    ['bad chunked framing', 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\nzz\r\n', 400, 'bad_request'],
    ['both Content-Length and chunked', 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n{}', 400, 'bad_request'],
    ['header overflow', `GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`, 431, 'headers_too_large'],
    ['malformed URL', 'GET /v1/models%zz HTTP/1.1\r\nHost: x\r\n\r\n', 400, 'bad_request'],
  ];
  for (const [name, bytes, status, code] of cases) {
    const r = await raw(bytes);
    const e = openAiError(r.text);
    assert.equal(e.status, status, `${name}: ${r.text.slice(0, 300)}`);
    assert.equal(e.code, code, name);
    assert.equal(e.type, 'invalid_request_error', name);
  }
  await waitForIdle(server.headroom);
});
