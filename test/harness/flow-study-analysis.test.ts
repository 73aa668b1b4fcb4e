// The study's pure parts: the CSV round trip, matched medians, the request-cap rule and the
// mixed-size decision, on hand-made rows whose answers are known.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { formatCsv, parseCsv } from '../../src/harness/flow-study/csv.ts';
import type { SummaryFacts } from '../../src/harness/flow-study/analysis.ts';
import { MEDIAN_METRICS, chooseRequestCap, matchedMedians, mixedDecision, requestDecision } from '../../src/harness/flow-study/analysis.ts';
import type { RequestRecord } from '../../src/harness/record.ts';
import { trafficSamples } from '../../src/harness/flow-study/evidence.ts';

test('CSV: fields with commas, quotes and line breaks survive a round trip; null and NaN are empty', () => {
  const t = { columns: ['a', 'b', 'c'] as const, rows: [{ a: 'x,y', b: 'say "hi"\nthere', c: 1.5 }, { a: null, b: NaN, c: true }] };
  const text = formatCsv(t);
  const back = parseCsv(text);
  assert.deepEqual(back.header, ['a', 'b', 'c']);
  assert.deepEqual(back.rows, [{ a: 'x,y', b: 'say "hi"\nthere', c: '1.5' }, { a: '', b: '', c: 'true' }]);
});

const facts = (config: string, repeat: number, rps: number, p95: number, extra: Partial<Record<(typeof MEDIAN_METRICS)[number], number>> = {}): SummaryFacts => ({
  phase: 'mixed',
  config,
  cap_kind: config.split('-')[0]!,
  level: config.split('-')[1]!,
  cap_value: 1,
  repeat,
  metrics: { ...(Object.fromEntries(MEDIAN_METRICS.map((m) => [m, NaN])) as Record<(typeof MEDIAN_METRICS)[number], number>), steady_rps: rps, p95_ttft_ms: p95, ...extra },
});

test('matched medians: the middle of three repeats, the mean of the middle two of an even count, NaN repeats left out', () => {
  const m = matchedMedians([facts('request-8', 1, 10, 300), facts('request-8', 2, 12, 100), facts('request-8', 3, 11, 200), facts('input-1.0x', 1, 5, 50), facts('input-1.0x', 2, 7, NaN)]);
  assert.equal(m.length, 2);
  assert.equal(m[0]!.medians.steady_rps, 11);
  assert.equal(m[0]!.medians.p95_ttft_ms, 200);
  assert.deepEqual(m[0]!.repeats, [1, 2, 3]);
  assert.equal(m[1]!.medians.steady_rps, 6);
  assert.equal(m[1]!.medians.p95_ttft_ms, 50);
  assert.equal(m[1]!.medians.p50_ttft_ms, null, 'never measured: null, not 0');
});

test('request-cap rule: the smallest cap within tolerance of the best RPS, and the next larger cap as its boundary', () => {
  const pts = [
    { cap: 16, rps: 40 }, { cap: 128, rps: 49.6 }, { cap: 32, rps: 45 }, { cap: 160, rps: 51.1 }, { cap: 96, rps: 48 },
  ];
  const c = chooseRequestCap(pts, 0.05);
  assert.equal(c.bestRps, 51.1);
  assert.equal(c.selected, 128, '96 serves 48 < 0.95 x 51.1; 128 serves 49.6 >= 48.545');
  assert.equal(c.comparison, 160);
  assert.equal(chooseRequestCap(pts, 0.2).selected, 32, '0.8 x 51.1 = 40.9 > 40');
  assert.equal(chooseRequestCap(pts, 0.25).selected, 16);
  assert.equal(chooseRequestCap([{ cap: 4, rps: 3 }], 0.05).comparison, null);
  assert.throws(() => chooseRequestCap([{ cap: 4, rps: NaN }], 0.05), /at least one measured cap/);
});

test('mixed decision: input-token admission advances only with no less RPS and no worse short-request p95', () => {
  const rows = [
    facts('request-128', 1, 18.8, 0, { p95_ttft_short_ms: 8419, p95_ttft_long_ms: 4163 }),
    facts('input-1.0x', 1, 21.4, 0, { p95_ttft_short_ms: 6621, p95_ttft_long_ms: 6352 }),
    facts('total-1.0x', 1, 6.78, 0, { p95_ttft_short_ms: 41909 }),
  ];
  const d = mixedDecision(matchedMedians(rows), 0.05)!;
  assert.equal(d['selected_kind'], 'input');
  assert.equal(d['total_estimate_advances'], false);
  assert.match(String(d['why']), /steady RPS \+13.8%, short p95 TTFT -1798 ms, medium n\/a, long \+2189 ms/);
  const worse = mixedDecision(matchedMedians([rows[0]!, facts('input-1.0x', 1, 21.4, 0, { p95_ttft_short_ms: 9000 })]), 0.05)!;
  assert.equal(worse['selected_kind'], 'request');
  assert.equal(mixedDecision(matchedMedians([rows[0]!]), 0.05), null, 'no input-token point: no decision');
});

test('traffic samples: counts from the rows at every tick, the last tick holding the totals', () => {
  const rec = (sent: number, end: number, outcome: RequestRecord['outcome']): RequestRecord => ({ sent_ms: sent, end_ms: end, outcome } as RequestRecord);
  const rows = trafficSamples('p', [rec(0, 400, 'ok'), rec(100, 1200, 'ok'), rec(600, 650, 'shed')], 500);
  assert.deepEqual(rows.map((r) => [r.t_s, r.issued, r.completed, r.outstanding, r.refused]), [
    [0, 1, 0, 1, 0],
    [0.5, 2, 1, 1, 0],
    [1, 3, 2, 1, 1],
    [1.5, 3, 3, 0, 1],
  ]);
});

test('request decision on matched medians: the rule applied among the repeated caps, the deltas to the boundary stated', () => {
  const sweep = (cap: number, repeat: number, rps: number, p95: number, p99: number): SummaryFacts => ({
    ...facts(`request-${cap}`, repeat, rps, p95, { p99_ttft_ms: p99, rate_429: 0.02 }), phase: 'request-sweep', cap_value: cap,
  });
  const rows = [sweep(64, 1, 40, 1500, 1900), sweep(128, 1, 49, 2000, 2500), sweep(128, 2, 50, 2076, 2548), sweep(128, 3, 51, 2100, 2600),
    sweep(160, 1, 51, 2400, 3000), sweep(160, 2, 51.1, 2439, 3091), sweep(160, 3, 52, 2500, 3100)];
  const d = requestDecision(matchedMedians(rows), 0.05);
  assert.equal(d['selected_cap'], 128);
  assert.equal(d['comparison_cap'], 160);
  assert.equal(d['why'], 'cap 160 against cap 128 (matched medians over 3 repeats): steady RPS +2.2%, p95 TTFT +363 ms, p99 TTFT +543 ms, 429 rate +0.0 pp');
  // A single-run calibration point does not decide against three repeats, even when it looks better.
  const lucky = requestDecision(matchedMedians([...rows, sweep(192, 1, 60, 1000, 1200)]), 0.05);
  assert.equal(lucky['selected_cap'], 128);
  assert.equal(lucky['comparison_cap'], 160);
});
