// The capacity probe's estimator: completions that end inside the window, over the window; the
// first wave (before the window) and anything but a completion do not count.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { capacityRps } from '../../src/demo/capacity.ts';
import type { RequestRecord } from '../../src/harness/record.ts';

const rec = (outcome: RequestRecord['outcome'], endMs: number): RequestRecord => ({
  request_id: 0, loop: 'closed', worker: 0, klass: 'shared', prefix_id: 0, phase: 'steady', intended_ms: 0, sent_ms: 0, slip_ms: 0,
  headers_ms: null, ttft_ms: null, e2e_ms: null, end_ms: endMs, itl_ms: [], num_chunks: 0, prompt_tokens_est: 1, prompt_tokens: null,
  completion_tokens: null, max_tokens: 1, http_status: 200, outcome, shed_reason: null, retry_after_s: null, error: null, censored: false,
});

test('capacityRps counts completions ending inside [from, to) over its span', () => {
  const records = [rec('ok', 4999), rec('ok', 5000), rec('ok', 9000), rec('ok', 14_999), rec('ok', 15_000), rec('transport_error', 8000), rec('shed', 8000), rec('timeout', 8000)];
  assert.equal(capacityRps(records, 5000, 15_000), 0.3);
  assert.equal(capacityRps([], 5000, 15_000), 0);
  assert.throws(() => capacityRps(records, 5000, 5000), /expected toMs > fromMs/);
});
