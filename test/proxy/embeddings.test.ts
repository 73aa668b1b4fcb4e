// /v1/embeddings through the gateway: forwarded to an upstream that lists the model, with the
// gateway's auth (the client's key checked, the upstream's key sent), the request id passed on and
// returned, the body both ways unchanged; an upstream that lists the model but answers 404 for the
// route (a generation server) is failed over, and if none serves it the client gets that 404.
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, test } from 'node:test';
import { request } from 'undici';
import { KeyRing } from '../../src/api/auth.ts';
import type { TestGateway } from '../helpers/gateway.ts';
import { startTestGateway } from '../helpers/gateway.ts';
import { StubUpstream } from '../helpers/stub-upstream.ts';

/** An upstream serving embeddings for `model`, or (`serves: false`) listing it and answering the route 404 as a generation server would. */
class EmbeddingsStub {
  readonly requests: { headers: http.IncomingHttpHeaders; body: string }[] = [];
  readonly #server: http.Server;
  url = '';

  constructor(readonly model: string, readonly serves = true) {
    this.#server = http.createServer((req, res) => {
      const path = (req.url ?? '/').split('?')[0]!;
      if (req.method === 'GET' && path === '/health') return void res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      if (req.method === 'GET' && path === '/v1/models') return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ object: 'list', data: [{ id: model, object: 'model' }] }));
      if (req.method !== 'POST' || path !== '/v1/embeddings') return void res.writeHead(404).end();
      const parts: Buffer[] = [];
      req.on('data', (c: Buffer) => parts.push(c));
      req.on('end', () => {
        this.requests.push({ headers: req.headers, body: Buffer.concat(parts).toString() });
        if (!this.serves) return void res.writeHead(404, { 'content-type': 'text/plain' }).end('Not Found');
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ object: 'list', model, data: [{ object: 'embedding', index: 0, embedding: [0.25, -0.5] }], usage: { prompt_tokens: 1, total_tokens: 1 } }));
      });
    });
  }

  async start(): Promise<this> {
    await new Promise<void>((r) => this.#server.listen(0, '127.0.0.1', r));
    this.url = `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
    return this;
  }

  stop(): Promise<void> {
    return new Promise((r) => {
      this.#server.closeAllConnections();
      this.#server.close(() => r());
    });
  }
}

let stops: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const s of stops.reverse()) await s().catch(() => undefined);
  stops = [];
});

async function gateway(upstreams: readonly string[], opts: Parameters<typeof startTestGateway>[1] = {}): Promise<TestGateway> {
  const g = await startTestGateway(upstreams, opts);
  stops.push(() => g.close());
  return g;
}

async function stub<T extends { start(): Promise<T>; stop(): Promise<void> }>(s: T): Promise<T> {
  await s.start();
  stops.push(() => s.stop());
  return s;
}

const embed = (url: string, body: unknown, headers: Record<string, string> = {}) =>
  request(`${url}/v1/embeddings`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });

const access = { apiKey: 'sk-upstream-key', ca: null, cert: null, key: null, verify: true };

test('embeddings are forwarded to the upstream serving the model, with auth and the request id; chat still goes to the chat upstream', async () => {
  const emb = await stub(new EmbeddingsStub('emb-model'));
  const chat = await stub(new StubUpstream());
  const keys = KeyRing.load({ env: 'sk-client-key tenant-a' });
  const g = await gateway([chat.url, emb.url], { access, keys });
  const body = { model: 'emb-model', input: ['hello', 'world'], encoding_format: 'float' };

  const anonymous = await embed(g.url, body);
  assert.equal(anonymous.statusCode, 401, 'the gateway checks the client key as for chat');
  assert.equal(((await anonymous.body.json()) as { error: { code: string } }).error.code, 'invalid_api_key');
  assert.equal(emb.requests.length, 0);

  const res = await embed(g.url, body, { authorization: 'Bearer sk-client-key', 'x-request-id': 'emb-req-1' });
  assert.equal(res.statusCode, 200);
  assert.equal(res.headers['x-request-id'], 'emb-req-1');
  const json = (await res.body.json()) as { data: { embedding: number[] }[]; model: string };
  assert.deepEqual(json.data[0]!.embedding, [0.25, -0.5]);
  assert.equal(emb.requests.length, 1);
  const sent = emb.requests[0]!;
  assert.equal(sent.body, JSON.stringify(body), 'the body reached the upstream byte for byte');
  assert.equal(sent.headers['x-request-id'], 'emb-req-1');
  assert.equal(sent.headers.authorization, 'Bearer sk-upstream-key', "the upstream sees the gateway's key, never the client's");
  assert.equal(chat.requests.length, 0, 'the chat upstream does not list the embeddings model');

  const c = await request(`${g.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: 'Bearer sk-client-key' }, body: JSON.stringify({ model: 'stub-model', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 }) });
  assert.equal(c.statusCode, 200);
  await c.body.dump();
  assert.equal(chat.requests.length, 1);
});

test('embeddings: an unknown model is 404 model_not_found, a missing input 400, both from the gateway', async () => {
  const emb = await stub(new EmbeddingsStub('emb-model'));
  const g = await gateway([emb.url]);
  const unknown = await embed(g.url, { model: 'nope', input: 'x' });
  assert.equal(unknown.statusCode, 404);
  assert.equal(((await unknown.body.json()) as { error: { code: string } }).error.code, 'model_not_found');
  const missing = await embed(g.url, { model: 'emb-model' });
  assert.equal(missing.statusCode, 400);
  assert.equal(((await missing.body.json()) as { error: { code: string; param: string } }).error.param, 'input');
  assert.equal(emb.requests.length, 0);
});

test("an upstream that lists the model but not the route (404) is failed over; when none serves it, the client gets the 404 as OpenAI JSON", async () => {
  const notServed = await stub(new EmbeddingsStub('shared-model', false));
  const serves = await stub(new EmbeddingsStub('shared-model'));
  const g = await gateway([notServed.url, serves.url], { picker: { prefixWeight: 0, queueWeight: 0, kvWeight: 0 } });
  for (let i = 0; i < 4; i++) {
    const res = await embed(g.url, { model: 'shared-model', input: 'x' });
    assert.equal(res.statusCode, 200, `request ${i}`);
    await res.body.dump();
  }
  assert.equal(serves.requests.length, 4, 'every request was served');
  assert.ok(notServed.requests.length >= 1, 'round robin tried the one without the route');
  assert.equal(g.gateway.backend.pool.snapshot()[0]!.health, 'healthy', 'a 404 is not an upstream error');

  await serves.stop();
  await g.gateway.backend.pool.checkNow();
  const none = await embed(g.url, { model: 'shared-model', input: 'x' });
  assert.equal(none.statusCode, 404);
  const err = (await none.body.json()) as { error: { message: string; type: string } };
  assert.equal(err.error.type, 'not_found_error');
  assert.match(err.error.message, /404/);
});
