// A client that disconnects mid-stream cancels its upstream request: the stub upstream sees its
// connection close before it finished, the gateway's in-flight count goes back to zero; in front
// of a real Headroom server, the engine returns to idle long before the request's max_tokens.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { TestGateway } from '../helpers/gateway.ts';
import { startTestGateway, within } from '../helpers/gateway.ts';
import { startTestServer, waitForIdle } from '../helpers/headroom.ts';
import { readThenHangUp } from '../helpers/sse.ts';
import { StubUpstream } from '../helpers/stub-upstream.ts';

async function eventually(cond: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
  const t0 = Date.now();
  while (!cond()) {
    if (Date.now() - t0 > timeoutMs) assert.fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

test('a client disconnect mid-stream aborts the upstream request', async () => {
  // Tokens go out only when released: the stream is certainly mid-flight when the client leaves.
  const stub = await new StubUpstream({ tokens: 100, autoRelease: false }).start();
  let gw: TestGateway | null = null;
  try {
    gw = await startTestGateway([stub.url]);
    stub.release(2);
    const seen = await readThenHangUp(gw.url, { model: 'stub-model', prompt: 'a long story', max_tokens: 100 }, 2);
    assert.equal(seen, 2);
    await within(stub.waitForAbort(), 'the upstream to see the request aborted');
    const r = stub.requests[0]!;
    assert.ok(r.aborted && !r.finished, 'the upstream saw its connection close before it finished');
    await eventually(() => gw!.gateway.backend.numInFlight === 0, 'the in-flight count to return to 0');
    assert.equal(gw.gateway.backend.pool.upstreams[0]!.numInFlight, 0);
    assert.equal(gw.gateway.backend.pool.upstreams[0]!.health, 'healthy', 'a client leaving is not the upstream failing');
  } finally {
    await gw?.close();
    await stub.stop();
  }
});

test('in front of Headroom, a client disconnect frees the engine long before max_tokens', async () => {
  const upstream = await startTestServer({ mock: { cost: { speed: 1 } } });
  let gw: TestGateway | null = null;
  try {
    gw = await startTestGateway([upstream.url]);
    const body = { model: 'headroom-mock', prompt: 'a long story about the river', max_tokens: 800, ignore_eos: true };
    await Promise.all([readThenHangUp(gw.url, body, 3), readThenHangUp(gw.url, body, 10)]);
    await waitForIdle(upstream.headroom, 10_000);
    const stats = upstream.headroom.engine.stats();
    assert.equal(stats.scheduler.numRunning, 0);
    assert.ok(stats.numSteps < 800, `the engine ran ${stats.numSteps} steps: it kept generating for a client that left`);
    await eventually(() => gw!.gateway.backend.numInFlight === 0, 'the in-flight count to return to 0');
  } finally {
    await gw?.close();
    await upstream.close();
  }
});
