// Flow control in front of the gateway is the engine mode's code: past the request cap, with no
// queue, a request gets 429 rate_limited with Retry-After; the slot comes back when the stream ends.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { request } from 'undici';
import { FlowController } from '../../src/flow/flow-controller.ts';
import { startTestGateway, within } from '../helpers/gateway.ts';
import { streamCompletion } from '../helpers/sse.ts';
import { StubUpstream } from '../helpers/stub-upstream.ts';

test('gateway mode: past the in-flight cap a request gets 429 with Retry-After; the slot returns when the stream ends', async () => {
  const stub = await new StubUpstream({ tokens: 3, autoRelease: false }).start();
  const flow = new FlowController({ maxRequests: 1, maxInputTokens: Infinity, maxTotalTokens: Infinity, shares: [1], queueSize: 0, queueTtlMs: 1000 });
  const gw = await startTestGateway([stub.url], { flow });
  const body = { model: 'stub-model', prompt: 'hi', max_tokens: 3 };
  try {
    stub.release(1);
    const first = streamCompletion(gw.url, { ...body, stream: true });
    await within(stub.waitForRequests(1), 'the first request to reach the upstream');
    const second = await request(`${gw.url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    assert.equal(second.statusCode, 429);
    assert.equal(((await second.body.json()) as { error: { code: string } }).error.code, 'rate_limited');
    assert.ok(Number(second.headers['retry-after']) >= 1);
    stub.release(10);
    assert.ok((await first).sawDone);
    const third = await request(`${gw.url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    assert.equal(third.statusCode, 200);
    await third.body.dump();
    assert.equal(flow.state().inFlight.requests, 0);
    assert.equal(stub.requests.length, 2, 'the refused request never reached the upstream');
  } finally {
    await gw.close();
    await stub.stop();
  }
});
