// The gateway drains as engine mode does: /ready turns 503 at once, a new request gets 503
// `draining` with Retry-After, a stream in flight finishes whole; past the deadline a stream still
// running gets an SSE error event and [DONE], and its upstream request is cancelled.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { request } from 'undici';
import { startTestGateway, within } from '../helpers/gateway.ts';
import { streamCompletion } from '../helpers/sse.ts';
import { StubUpstream } from '../helpers/stub-upstream.ts';

const body = { model: 'stub-model', messages: [{ role: 'user', content: 'hi' }], max_tokens: 5, stream: true };

test('a drain refuses new requests and lets the stream in flight finish', async () => {
  const stub = await new StubUpstream({ tokens: 5, autoRelease: false }).start();
  const gw = await startTestGateway([stub.url]);
  try {
    stub.release(1);
    const stream = streamCompletion(gw.url, body, '/v1/chat/completions');
    await within(stub.waitForRequests(1), 'the stream to reach the upstream');
    const drained = gw.gateway.drain(60_000);
    const ready = await request(`${gw.url}/ready`);
    assert.equal(ready.statusCode, 503);
    await ready.body.dump();
    const late = await request(`${gw.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ ...body, stream: false }) });
    assert.equal(late.statusCode, 503);
    assert.equal(((await late.body.json()) as { error: { code: string } }).error.code, 'draining');
    assert.ok(Number(late.headers['retry-after']) >= 1);
    stub.release(10);
    const r = await stream;
    assert.equal(r.status, 200);
    assert.ok(r.sawDone);
    assert.equal(r.finishReason, 'length');
    assert.equal(await drained, 'drained');
  } finally {
    await stub.stop();
  }
});

test('past the drain deadline a running stream ends with an error event and [DONE]; the upstream request is cancelled', async () => {
  const stub = await new StubUpstream({ tokens: 5, autoRelease: false }).start();
  const gw = await startTestGateway([stub.url]);
  try {
    stub.release(1);
    const stream = streamCompletion(gw.url, body, '/v1/chat/completions');
    await within(stub.waitForRequests(1), 'the stream to reach the upstream');
    assert.equal(await gw.gateway.drain(100), 'deadline');
    const r = await stream;
    assert.equal(r.status, 200);
    assert.equal((r.chunks.at(-1) as unknown as { error?: { code: string } }).error?.code, 'engine_failure');
    assert.ok(r.sawDone);
    await within(stub.waitForAbort(), 'the upstream request to be cancelled');
  } finally {
    await stub.stop();
  }
});
