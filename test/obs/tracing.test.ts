// OpenTelemetry: with --otel-endpoint, every request is exported over OTLP/HTTP as one span with
// queue → prefill → decode children, in order, contiguous, inside the parent; off by default.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { tracesUrl } from '../../src/obs/tracing.ts';
import { startTestServer } from '../helpers/headroom.ts';
import type { StubSpan } from './otlp-stub.ts';
import { startOtlpStub } from './otlp-stub.ts';
import { complete, sleep } from './util.ts';

async function until(cond: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const t0 = Date.now();
  while (!cond()) {
    if (Date.now() - t0 > timeoutMs) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(20);
  }
}

test('each request is a span with queue, prefill and decode children in order', async () => {
  const stub = await startOtlpStub();
  // test/helpers' startTestServer takes no obs options: build the server here, tracing on.
  const { Headroom } = await import('../../src/app.ts');
  const { MockRunner } = await import('../../src/engine/runner/mock/mock-runner.ts');
  const { serverConfig } = await import('../../src/api/config.ts');
  const h = new Headroom({
    runner: new MockRunner({ cost: { speed: 1 }, maxSequences: 2 }),
    server: serverConfig({ host: '127.0.0.1', port: 0 }),
    scheduler: { scheduler: 'continuous' },
    maxQueuedRequests: 64,
    obs: { otelEndpoint: stub.url, tracing: { exportDelayMs: 50 } },
  });
  const url = await h.start();
  try {
    const parentTrace = '0af7651916cd43dd8448eb211c80319c';
    const parentSpan = 'b7ad6b7169203331';
    // 4 requests on 2 sequences: some wait in the queue for a while.
    const res = await Promise.all([
      complete(url, { prompt: 'traced with a parent', max_tokens: 8 }, { traceparent: `00-${parentTrace}-${parentSpan}-01` }),
      ...[1, 2, 3].map((i) => complete(url, { prompt: `traced ${i}`, max_tokens: 8 })),
    ]);
    assert.ok(res.every((r) => r.status === 200));
    await until(() => stub.spans.filter((x) => x.name === 'headroom.request').length === 4, 5000, '4 request spans');
    await until(() => stub.spans.length === 16, 5000, '16 spans');

    const roots = stub.spans.filter((x) => x.name === 'headroom.request');
    assert.equal(new Set(roots.map((r) => r.traceId)).size, 4, 'one trace per request');
    for (const root of roots) {
      assert.equal(root.resource['service.name'], 'headroom');
      assert.equal(root.attributes['headroom.finish_reason'], 'length');
      assert.equal(root.attributes['gen_ai.usage.output_tokens'], 8);
      const kids = stub.spans.filter((x) => x.parentSpanId === root.spanId);
      assert.deepEqual(kids.map((k) => k.name).sort(), ['decode', 'prefill', 'queue']);
      const by = (n: string): StubSpan => kids.find((k) => k.name === n)!;
      const [queue, prefill, decode] = [by('queue'), by('prefill'), by('decode')];
      for (const k of kids) assert.equal(k.traceId, root.traceId);
      // In order and contiguous: queue ends where prefill starts, prefill where decode starts.
      assert.equal(queue.startNs, root.startNs);
      assert.equal(queue.endNs, prefill.startNs);
      assert.equal(prefill.endNs, decode.startNs);
      assert.equal(decode.endNs, root.endNs);
      assert.ok(queue.startNs <= queue.endNs && prefill.startNs <= prefill.endNs && decode.startNs < decode.endNs);
    }
    const withParent = roots.filter((r) => r.traceId === parentTrace);
    assert.equal(withParent.length, 1, 'the traceparent header became the parent');
    assert.equal(withParent[0]!.parentSpanId, parentSpan);
    assert.equal(roots.filter((r) => r.parentSpanId === '').length, 3);
    // Someone waited: with 2 sequences and 4 requests at once, the longest queue span is real time.
    const queueMs = stub.spans.filter((x) => x.name === 'queue').map((x) => Number(x.endNs - x.startNs) / 1e6);
    assert.ok(Math.max(...queueMs) > 1, `queue spans ${queueMs.map((q) => q.toFixed(2)).join(', ')} ms`);
  } finally {
    await h.close();
    await stub.close();
  }
});

test('tracing is off by default', async () => {
  const s = await startTestServer();
  try {
    assert.equal(s.headroom.obs.tracer, null);
    assert.notEqual(s.headroom.obs.metrics, null);
  } finally {
    await s.close();
  }
});

test('the OTLP endpoint: a base URL gets /v1/traces, a full URL is kept, junk is refused', () => {
  assert.equal(tracesUrl('http://collector:4318'), 'http://collector:4318/v1/traces');
  assert.equal(tracesUrl('http://collector:4318/custom/traces'), 'http://collector:4318/custom/traces');
  assert.throws(() => tracesUrl('collector:4318'), /expected an http\(s\) URL/);
});
