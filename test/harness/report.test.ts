// The report's arithmetic on a hand-made record set: every expected number is worked out by hand.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { RequestRecord } from '../../src/harness/record.ts';
import { byClass, sloSensitivity, summarize } from '../../src/harness/report.ts';
import { quantileSorted } from '../../src/harness/stats.ts';

let nextId = 0;
function rec(p: Partial<RequestRecord>): RequestRecord {
  const intended = p.intended_ms ?? 1000;
  return {
    request_id: nextId++,
    loop: 'open',
    worker: null,
    klass: 'short',
    prefix_id: null,
    phase: 'steady',
    intended_ms: intended,
    sent_ms: intended + (p.slip_ms ?? 0),
    slip_ms: 0,
    headers_ms: null,
    ttft_ms: null,
    e2e_ms: null,
    end_ms: intended,
    itl_ms: [],
    num_chunks: 0,
    prompt_tokens_est: 100,
    prompt_tokens: null,
    completion_tokens: null,
    max_tokens: 16,
    http_status: 200,
    outcome: 'ok',
    shed_reason: null,
    retry_after_s: null,
    error: null,
    censored: false,
    ...p,
  };
}

// Steady window 10 s. Ten steady rows + two flagged rows:
//   ok:  e2e 100, 200, 300, 400, 1500 (short x3, long x2)   ttft 10,20,30,40,50
//   shed: 503 x1, 429 x1; http_error 500 x1; transport_error x1; timeout (censored) x1
//   warmup ok row e2e 1 and cooldown ok row e2e 1 must not count.
function records(): RequestRecord[] {
  nextId = 0;
  const ok = (e2e: number, ttft: number, klass: string, itl: number[], out: number): RequestRecord =>
    rec({ e2e_ms: e2e, ttft_ms: ttft, klass, itl_ms: itl, num_chunks: out, completion_tokens: out, prompt_tokens: 50, slip_ms: 1 });
  return [
    ok(100, 10, 'short', [10, 20], 3),
    ok(200, 20, 'short', [30], 2),
    ok(300, 30, 'short', [], 1),
    ok(400, 40, 'long', [40, 50, 60], 4),
    ok(1500, 50, 'long', [], 1),
    rec({ outcome: 'shed', http_status: 503, shed_reason: 'queue_full', klass: 'long' }),
    rec({ outcome: 'shed', http_status: 429, shed_reason: 'rate_limited' }),
    rec({ outcome: 'http_error', http_status: 500 }),
    rec({ outcome: 'transport_error', http_status: null, error: 'ECONNRESET' }),
    rec({ outcome: 'timeout', censored: true, ttft_ms: 60 }),
    rec({ phase: 'warmup', e2e_ms: 1, ttft_ms: 1 }),
    rec({ phase: 'cooldown', e2e_ms: 1, ttft_ms: 1 }),
  ];
}

test('quantiles interpolate linearly between order statistics (numpy default)', () => {
  assert.equal(quantileSorted([1, 2, 3, 4], 0.5), 2.5);
  assert.ok(Math.abs(quantileSorted([10, 20, 30, 40, 50], 0.99) - 49.6) < 1e-9);
  assert.equal(quantileSorted([1, 2, Infinity], 0.99), Infinity);
  assert.equal(quantileSorted([1, 2, Infinity], 0.25), 1.5);
});

test('counts, rates, goodput and attainment from a hand-made record set', () => {
  const s = summarize(records(), { sloMs: 350, windowS: 10, timeoutMs: 5000 });
  assert.equal(s.num_rows, 12);
  assert.equal(s.num_warmup, 1);
  assert.equal(s.num_cooldown, 1);
  assert.equal(s.num_arrivals, 10);
  assert.equal(s.completed, 5);
  assert.equal(s.num_shed, 2);
  assert.equal(s.num_429, 1);
  assert.equal(s.num_http_errors, 1);
  assert.equal(s.num_transport_errors, 1);
  assert.equal(s.num_timeouts, 1);
  assert.equal(s.offered_rate, 1);
  assert.equal(s.request_throughput, 0.5);
  assert.equal(s.request_goodput, 0.3); // e2e 100, 200, 300 <= 350
  assert.equal(s.slo_attainment, 0.3); // 3 of 10 arrivals
  assert.equal(s.slo_attainment_admitted, 3 / 8);
  assert.equal(s.shed_rate, 0.2);
  assert.equal(s.rate_429, 0.1);
  assert.equal(s.total_input_tokens, 250);
  assert.equal(s.total_output_tokens, 11);
  assert.equal(s.output_throughput, 1.1);
  assert.equal(s.total_token_throughput, 26.1);
  // TTFT over the 6 rows with a first token (10..60): median 35, mean 35.
  assert.equal(s.median_ttft_ms, 35);
  assert.equal(s.mean_ttft_ms, 35);
  // ITL pooled over ok rows: 10,20,30,40,50,60 -> median 35, p99 = 50 + 0.95*10.
  assert.equal(s.median_itl_ms, 35);
  assert.ok(Math.abs(s.p99_itl_ms - 59.5) < 1e-9);
  // TPOT: (100-10)/2 = 45, (200-20)/1 = 180, (400-40)/3 = 120 -> median 120.
  assert.equal(s.median_tpot_ms, 120);
  // E2E: 100,200,300,400,1500 plus the censored row at +Infinity -> median 350, p99 Infinity, mean Infinity.
  assert.equal(s.median_e2el_ms, 350);
  assert.equal(s.p99_e2el_ms, Infinity);
  assert.equal(s.mean_e2el_ms, Infinity);
  assert.equal(s.schedule_delay['median'], 0.0005); // five rows slip 1 ms, five 0 ms, in seconds
  assert.equal(s.loop, 'open');
  assert.equal(s.slo_exceeds_timeout, false);
});

test('goodput moves with the SLO, from the same rows', () => {
  const sens = sloSensitivity(records(), [50, 100, 350, 1000, 2000], 10);
  assert.deepEqual(
    sens.map((r) => [r.slo_ms, r.goodput, r.slo_attainment]),
    [
      [50, 0, 0],
      [100, 0.1, 0.1],
      [350, 0.3, 0.3],
      [1000, 0.4, 0.4],
      [2000, 0.5, 0.5],
    ],
  );
});

test('per-class breakdown', () => {
  const rows = byClass(records(), { sloMs: 350, windowS: 10, timeoutMs: 5000 });
  assert.deepEqual(rows.map((r) => r.klass), ['long', 'short']);
  const [long, short] = rows;
  assert.equal(long?.num_arrivals, 3);
  assert.equal(long?.completed, 2);
  assert.equal(long?.num_shed, 1);
  assert.equal(long?.goodput, 0);
  assert.equal(long?.e2el.median, 950);
  assert.equal(short?.num_arrivals, 7);
  assert.equal(short?.goodput, 0.3);
  assert.ok(Math.abs((short?.slo_attainment ?? 0) - 3 / 7) < 1e-12);
});
