// The parts of the burst and soak benchmarks that judge, checked alone: the outcome kind read from a
// connection's raw bytes (bench/burst/outcome.ts: a misread kind would make the burst test's sums
// and matches meaningless) and the soak's trend (bench/soak/trend.ts).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { classify } from '../../bench/burst/outcome.ts';
import { trend } from '../../bench/soak/trend.ts';
import type { Sample } from '../../bench/soak/trend.ts';

const http = (status: string, headers: string, body: string): Buffer => Buffer.from(`HTTP/1.1 ${status}\r\n${headers}\r\n\r\n${body}`);
const error = (code: string, message: string): string => JSON.stringify({ error: { message, type: 'x', param: null, code } });

test('classify: a stream to [DONE] is ok; an error event or a cut stream is not', () => {
  const chunk = 'data: {"choices":[{"delta":{"content":"a"}}]}\n\n';
  assert.equal(classify(http('200 OK', 'transfer-encoding: chunked', `${chunk}data: [DONE]\n\n`), null, false), 'ok');
  assert.equal(classify(http('200 OK', '', `${chunk}data: ${error('engine_failure', 'x')}\n\ndata: [DONE]\n\n`), null, false), 'stream_error');
  assert.equal(classify(http('200 OK', '', chunk), 'ECONNRESET', false), 'truncated');
  assert.equal(classify(http('200 OK', '', chunk), null, true), 'timeout');
});

test('classify: refusals by status and reason, from the words flow control uses', () => {
  const full = 'Too many requests in flight: the in-flight request cap (32) is reached and the wait queue is full; retry shortly.';
  assert.equal(classify(http('429 Too Many Requests', 'retry-after: 1', error('rate_limited', full)), null, false), '429 queue_full');
  const ttl = 'Waited 2000 ms for a slot (--flow-queue-ttl-ms) without getting one; retry later.';
  assert.equal(classify(http('429 Too Many Requests', '', error('rate_limited', ttl)), null, false), '429 queue_ttl');
  assert.equal(classify(http('429 Too Many Requests', '', error('rate_limited', 'something new')), null, false), '429 other');
  assert.equal(classify(http('503 Service Unavailable', '', error('too_many_connections', 'x')), 'ECONNRESET', false), '503 too_many_connections');
  assert.equal(classify(http('503 Service Unavailable', '', error('slo_unattainable', 'x')), null, false), '503 slo_unattainable');
  assert.equal(classify(http('500 Internal Server Error', '', 'oops'), null, false), '500 unknown');
});

test('classify: no answer at all, by how the connection ended', () => {
  assert.equal(classify(Buffer.alloc(0), null, false), 'closed');
  assert.equal(classify(Buffer.alloc(0), 'ECONNRESET', false), 'reset');
  assert.equal(classify(Buffer.alloc(0), 'EPIPE', false), 'reset');
  assert.equal(classify(Buffer.alloc(0), 'ECONNREFUSED', false), 'refused');
  assert.equal(classify(Buffer.alloc(0), 'EADDRNOTAVAIL', false), 'error EADDRNOTAVAIL');
  assert.equal(classify(Buffer.alloc(0), null, true), 'timeout');
});

test('trend: slope per 10 minutes and the first and last windows, from the warm-up on', () => {
  const base = { heapUsedMiB: null, lagP99Ms: null, lagMaxMs: null, running: null, waiting: null, freeKvBlocks: null, cachedNodes: null, flowInFlight: null, clientInFlight: 0, sent: 0, completed: 0, aborted: 0, refused: 0, errors: 0, idleFreeKvBlocks: null };
  // 1 MiB per minute from 100 MiB, after a warm-up spike at t = 0.
  const samples: Sample[] = [{ ...base, tS: 0, rssMiB: 500 }, ...Array.from({ length: 60 }, (_, i) => ({ ...base, tS: 60 + i * 60, rssMiB: 100 + i }))];
  const t = trend(samples, 'rssMiB', 60, 300);
  assert.ok(Math.abs(t.slopePer10Min! - 10) < 1e-9, String(t.slopePer10Min));
  assert.equal(t.firstWindowMean, 102); // t = 60..300: 100..104
  assert.equal(t.lastWindowMean, 157); // t = 3360..3600: 155..159
  assert.equal(t.max, 159);
  assert.deepEqual(trend(samples, 'heapUsedMiB', 60, 300), { slopePer10Min: null, firstWindowMean: null, lastWindowMean: null, max: null });
});
