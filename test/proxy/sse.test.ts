// SSE bytes pass through the gateway unchanged, and the gateway measures the stream itself: TTFT
// (one per request, at the first text), ITL (one per later text event), E2E and the outcome show in
// its /metrics under the same names as engine mode, with its upstream series beside them.
import assert from 'node:assert/strict';
import net from 'node:net';
import { test } from 'node:test';
import { request } from 'undici';
import type { TestGateway } from '../helpers/gateway.ts';
import { startTestGateway } from '../helpers/gateway.ts';
import { StubUpstream } from '../helpers/stub-upstream.ts';
import { sample } from '../obs/util.ts';

test('SSE bytes arrive unchanged; TTFT, ITL and E2E measured by the gateway show in its metrics', async () => {
  const tokens = 6;
  const stub = await new StubUpstream({ tokens, autoRelease: false }).start();
  let gw: TestGateway | null = null;
  try {
    gw = await startTestGateway([stub.url]);
    // Tokens one at a time, each released once the client has the one before: separate events.
    // (The gateway answers once the first event is in: that one goes out before the response.)
    stub.release(1);
    let released = 1;
    const res = await request(`${gw.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'stub-model', messages: [{ role: 'user', content: 'hi' }], max_tokens: tokens, stream: true }) });
    assert.equal(res.statusCode, 200);
    assert.match(String(res.headers['content-type']), /^text\/event-stream/);
    const received: Buffer[] = [];
    for await (const chunk of res.body) {
      received.push(chunk as Buffer);
      const events = Buffer.concat(received).toString().split('\n\n').length - 1;
      if (events >= released && released < tokens) {
        stub.release(1);
        released++;
      }
    }
    const sent = Buffer.concat(stub.requests[0]!.sent);
    assert.ok(sent.length > 0);
    assert.ok(Buffer.concat(received).equals(sent), 'the client got exactly the bytes the upstream sent');

    const text = await (await request(`${gw.url}/metrics`)).body.text();
    assert.equal(sample(text, 'headroom_time_to_first_token_seconds_count'), 1);
    assert.equal(sample(text, 'vllm:time_to_first_token_seconds_count', 'model_name="stub-model"'), 1);
    assert.equal(sample(text, 'headroom_inter_token_latency_seconds_count'), tokens - 1);
    assert.equal(sample(text, 'headroom_e2e_request_latency_seconds_count'), 1);
    assert.equal(sample(text, 'headroom_requests_total', 'outcome="length"'), 1);
    assert.equal(sample(text, 'headroom_generation_tokens_total'), tokens);
    assert.ok(sample(text, 'headroom_time_to_first_token_seconds_sum')! <= sample(text, 'headroom_e2e_request_latency_seconds_sum')!);
    assert.equal(sample(text, 'headroom_upstream_healthy', `upstream="${stub.url}"`), 1);
    assert.equal(sample(text, 'headroom_upstream_forwarded_total', `upstream="${stub.url}"`), 1);
    assert.equal(sample(text, 'headroom_upstream_in_flight', `upstream="${stub.url}"`), 0);
    assert.equal(sample(text, 'headroom_gateway_failovers_total'), 0);
  } finally {
    await gw?.close();
    await stub.stop();
  }
});

test('a stream that arrives whole leaves the gateway in one write: its events and its end together', async () => {
  const stub = await new StubUpstream({ tokens: 4, autoRelease: true, oneWrite: true }).start();
  let gw: TestGateway | null = null;
  // Every write the gateway's client-facing sockets make (each is one system call when it goes out at once).
  const proto = net.Socket.prototype as unknown as { _write: Flush; _writev: Flush };
  const [write, writev] = [proto._write, proto._writev];
  let port = -1;
  const writes: string[] = [];
  const counting = (name: string, f: Flush): Flush =>
    function (this: net.Socket, ...args) {
      if (this.localPort === port) writes.push(name);
      return f.apply(this, args);
    };
  try {
    gw = await startTestGateway([stub.url]);
    port = Number(new URL(gw.url).port);
    const body = JSON.stringify({ model: 'stub-model', messages: [{ role: 'user', content: 'hi' }], max_tokens: 4, stream: true });
    const send = async (): Promise<string> => {
      const res = await request(`${gw!.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
      assert.equal(res.statusCode, 200);
      return res.body.text();
    };
    await send(); // connections open, code warm
    proto._write = counting('write', write);
    proto._writev = counting('writev', writev);
    const text = await send();
    proto._write = write;
    proto._writev = writev;
    assert.ok(text.includes(' t3') && text.endsWith('data: [DONE]\n\n'), 'the whole stream arrived');
    assert.deepEqual(writes, ['writev'], 'headers, events and the end of the response in one write');
  } finally {
    proto._write = write;
    proto._writev = writev;
    await gw?.close();
    await stub.stop();
  }
});

type Flush = (this: net.Socket, ...args: unknown[]) => unknown;
