// No client holds the server open: slow and silent bodies, silent connections and idle keep-alive
// sockets are closed at their timeouts (the request ones with a 408 in the OpenAI shape), and a
// flood of connections past the bound is refused while /health keeps answering.
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import type { Socket } from 'node:net';
import { after, before, test } from 'node:test';
import { request } from 'undici';
import type { TestServer } from '../helpers/headroom.ts';
import { startTestServer } from '../helpers/headroom.ts';

const HEADERS_TIMEOUT_MS = 600;
const REQUEST_TIMEOUT_MS = 1200;
const KEEP_ALIVE_MS = 500;
/** Generous: node checks the header and request timeouts on an interval, and the machine is shared. */
const SLACK_MS = 1500;

let server: TestServer;
let port: number;

before(async () => {
  server = await startTestServer({ server: { headersTimeoutMs: HEADERS_TIMEOUT_MS, requestTimeoutMs: REQUEST_TIMEOUT_MS, keepAliveTimeoutMs: KEEP_ALIVE_MS, maxConnections: 40, maxConnectionsPerAddress: 40 } });
  port = Number(new URL(server.url).port);
});
after(() => server.close());

interface Closed {
  readonly afterMs: number;
  readonly received: string;
}

/** Opens a raw socket, runs `drive` on it, and resolves when the server closes it. */
function rawSocket(drive: (s: Socket) => void): Promise<Closed> {
  return new Promise((resolve, reject) => {
    const s = connect(port, '127.0.0.1');
    let received = '';
    const t0 = performance.now();
    s.on('data', (b) => (received += b.toString('latin1')));
    s.on('error', () => undefined);
    s.on('close', () => resolve({ afterMs: performance.now() - t0, received }));
    s.on('connect', () => drive(s));
    setTimeout(() => {
      s.destroy();
      reject(new Error(`the server held the socket for 30 s; received ${JSON.stringify(received.slice(0, 200))}`));
    }, 30_000).unref();
  });
}

function assertOpenAi408(c: Closed, name: string): void {
  assert.match(c.received, /^HTTP\/1\.1 408 /, `${name}: ${c.received.slice(0, 200)}`);
  const body = JSON.parse(c.received.slice(c.received.indexOf('\r\n\r\n') + 4)) as { error: { code: string; type: string } };
  assert.equal(body.error.code, 'request_timeout');
  assert.equal(body.error.type, 'invalid_request_error');
}

const HEAD = 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n';

test('a slow body (one byte every 100 ms) is answered 408 and closed at the request timeout', async () => {
  let timer: NodeJS.Timeout | undefined;
  const c = await rawSocket((s) => {
    s.write(HEAD);
    timer = setInterval(() => s.writable && s.write('{'), 100);
  });
  clearInterval(timer);
  assertOpenAi408(c, 'slow body');
  assert.ok(c.afterMs >= REQUEST_TIMEOUT_MS - 50 && c.afterMs < REQUEST_TIMEOUT_MS + SLACK_MS, `closed after ${c.afterMs.toFixed(0)} ms`);
});

test('a silent body (headers, then nothing) is answered 408 and closed at the request timeout', async () => {
  const c = await rawSocket((s) => s.write(HEAD));
  assertOpenAi408(c, 'silent body');
  assert.ok(c.afterMs >= REQUEST_TIMEOUT_MS - 50 && c.afterMs < REQUEST_TIMEOUT_MS + SLACK_MS, `closed after ${c.afterMs.toFixed(0)} ms`);
});

test('slow headers are answered 408 and closed at the header timeout', async () => {
  let timer: NodeJS.Timeout | undefined;
  const c = await rawSocket((s) => {
    s.write('GET /health HTTP/1.1\r\n');
    timer = setInterval(() => s.writable && s.write('X-A: b\r\n'), 100);
  });
  clearInterval(timer);
  assertOpenAi408(c, 'slow headers');
  assert.ok(c.afterMs >= HEADERS_TIMEOUT_MS - 50 && c.afterMs < HEADERS_TIMEOUT_MS + SLACK_MS, `closed after ${c.afterMs.toFixed(0)} ms`);
});

test('a connection that never sends a byte is closed at the header timeout', async () => {
  const c = await rawSocket(() => undefined);
  assert.ok(c.afterMs < HEADERS_TIMEOUT_MS + SLACK_MS, `closed after ${c.afterMs.toFixed(0)} ms`);
});

test('an idle keep-alive connection is closed at the keep-alive timeout', async () => {
  const c = await rawSocket((s) => s.write('GET /health HTTP/1.1\r\nHost: x\r\n\r\n'));
  assert.match(c.received, /^HTTP\/1\.1 200 /);
  assert.ok(c.afterMs >= KEEP_ALIVE_MS - 50 && c.afterMs < KEEP_ALIVE_MS + SLACK_MS, `closed after ${c.afterMs.toFixed(0)} ms`);
});

test('a flood of connections past the bound is refused with 503 while /health answers', async () => {
  const stats = server.headroom.connections.stats();
  // Fill every normal slot with sockets that hold (headers started, never finished).
  const holders: Socket[] = [];
  const connected: Promise<void>[] = [];
  for (let i = 0; i < stats.softLimit; i++) {
    const s = connect(port, '127.0.0.1');
    s.on('error', () => undefined);
    connected.push(new Promise((resolve) => s.on('connect', () => {
      s.write('POST /v1/completions HTTP/1.1\r\n');
      resolve();
    })));
    holders.push(s);
  }
  try {
    await Promise.all(connected);
    await new Promise((r) => setTimeout(r, 50)); // the server has accepted them all
    // Past the bound: work is refused at once, probes are answered.
    for (let i = 0; i < 5; i++) {
      const c = await rawSocket((s) => s.write('POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}'));
      assert.match(c.received, /^HTTP\/1\.1 503 /, c.received.slice(0, 200));
      assert.match(c.received, /"code":"too_many_connections"/);
      assert.ok(c.afterMs < 1000, `refusal took ${c.afterMs.toFixed(0)} ms`);
    }
    const t0 = performance.now();
    const h = await request(`${server.url}/health`);
    assert.equal(h.statusCode, 200);
    await h.body.dump();
    assert.ok(performance.now() - t0 < 1000, '/health answered slowly during the flood');
  } finally {
    for (const s of holders) s.destroy();
  }
  // Once the flood is gone, work is served again.
  for (let i = 0; i < 200 && server.headroom.connections.stats().numOpen > 2; i++) await new Promise((r) => setTimeout(r, 5));
  const ok = await request(`${server.url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'headroom-mock', prompt: 'hi', max_tokens: 2 }) });
  assert.equal(ok.statusCode, 200);
  await ok.body.dump();
});

test('one address past its own bound is refused with 503 while the total bound has room; a silent one is closed and counted', async () => {
  const perAddress = await startTestServer({ server: { maxConnections: 40, maxConnectionsPerAddress: 4 } });
  const p = Number(new URL(perAddress.url).port);
  const holders: Socket[] = [];
  try {
    await Promise.all(Array.from({ length: 4 }, () => new Promise<void>((resolve) => {
      const s = connect(p, '127.0.0.1', () => {
        s.write('POST /v1/completions HTTP/1.1\r\n');
        resolve();
      });
      s.on('error', () => undefined);
      holders.push(s);
    })));
    await new Promise((r) => setTimeout(r, 50));
    const res = await request(`${perAddress.url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'headroom-mock', prompt: 'hi', max_tokens: 2 }), reset: true });
    assert.equal(res.statusCode, 503);
    assert.equal(((await res.body.json()) as { error: { code: string } }).error.code, 'too_many_connections');
    assert.equal(res.headers['retry-after'], '1');
    const h = await request(`${perAddress.url}/health`, { reset: true });
    assert.equal(h.statusCode, 200);
    await h.body.dump();
    // A connection past the bound that sends nothing is refused after a second with a raw 503, and
    // counted (before the 10 s headers timeout could answer it with a 408): never closed unanswered.
    const idleBefore = perAddress.headroom.connections.stats().numIdleClosed;
    const silent = await new Promise<{ afterMs: number; received: string }>((resolve) => {
      const s = connect(p, '127.0.0.1');
      const t0 = performance.now();
      let received = '';
      s.on('data', (b) => (received += b.toString('latin1')));
      s.on('error', () => undefined);
      s.on('close', () => resolve({ afterMs: performance.now() - t0, received }));
    });
    assert.match(silent.received, /^HTTP\/1\.1 503 Service Unavailable\r\n[^]*retry-after: 1\r\n[^]*"code":"too_many_connections"/);
    assert.ok(silent.afterMs >= 900 && silent.afterMs < 9000, `closed after ${silent.afterMs.toFixed(0)} ms`);
    assert.equal(perAddress.headroom.connections.stats().numIdleClosed, idleBefore + 1);
    assert.ok(perAddress.headroom.connections.stats().numRefusedRaw >= 1);
  } finally {
    for (const s of holders) s.destroy();
    await perAddress.close();
  }
});

test('a burst past the hard bound: every connection the server gives up on is answered 503 before it closes, and counted', async () => {
  const burst = await startTestServer({ server: { maxConnections: 20, maxConnectionsPerAddress: 20 } });
  const p = Number(new URL(burst.url).port);
  const { hardLimit } = burst.headroom.connections.stats();
  const numSockets = 300;
  const sockets: Socket[] = [];
  try {
    // Each sends the start of a request and nothing more: the first 20 hold their slots, the rest
    // are overflow — evicted by newer ones past the hard bound, or refused when idle.
    const outcomes = await Promise.all(Array.from({ length: numSockets }, () => new Promise<{ received: string; closed: boolean }>((resolve) => {
      let received = '';
      const s = connect(p, '127.0.0.1', () => s.write('POST /v1/completions HTTP/1.1\r\nHost: x\r\n'));
      sockets.push(s);
      s.on('data', (b) => (received += b.toString('latin1')));
      s.on('error', () => undefined);
      s.on('close', () => resolve({ received, closed: true }));
      // The served ones never close on their own within the test: settle them after the others.
      setTimeout(() => resolve({ received, closed: false }), 5000).unref();
    })));
    const closed = outcomes.filter((o) => o.closed);
    assert.ok(closed.length >= numSockets - hardLimit, `${closed.length} of ${numSockets} closed (hard bound ${hardLimit})`);
    const unanswered = closed.filter((o) => !/^HTTP\/1\.1 503 /.test(o.received));
    assert.equal(unanswered.length, 0, `closed without an answer: ${unanswered.length} (e.g. ${JSON.stringify(unanswered[0]?.received ?? '')})`);
    for (const o of closed) assert.match(o.received, /"code":"too_many_connections"/);
    const stats = burst.headroom.connections.stats();
    assert.equal(stats.numRefusedRaw, closed.length, 'each refusal counted');
    assert.ok(stats.numEvicted > 0, 'the hard bound was reached');
  } finally {
    for (const s of sockets) s.destroy();
    await burst.close();
  }
});
