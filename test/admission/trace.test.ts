// --trace-out: one row per finished choice (features as admission saw them, then the outcome) and
// one per refusal, through the real HTTP path.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { request } from 'undici';
import { parseTrace, toDataset } from '../../src/admission/dataset.ts';
import { FEATURE_NAMES, NUM_FEATURES } from '../../src/admission/features.ts';
import { TraceWriter } from '../../src/admission/trace-writer.ts';
import type { TraceRow } from '../../src/admission/trace-writer.ts';
import type { AdmissionDecision } from '../../src/admission/controller.ts';
import type { RequestTimeline } from '../../src/engine/outputs.ts';
import { startTestServer } from '../helpers/headroom.ts';

test('trace rows: features, decision and outcome per choice; refusals marked and censored', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'headroom-trace-'));
  const file = join(dir, 'trace.jsonl');
  const server = await startTestServer({ traceOut: file, scheduler: { scheduler: 'continuous' }, maxQueuedRequests: 3, mock: { cost: { speed: 1 } } });
  try {
    const post = (body: object, headers: Record<string, string> = {}) =>
      request(`${server.url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify({ model: 'headroom-mock', ...body }) });
    const ok = await post({ prompt: 'the queue and the server', max_tokens: 6, n: 2 }, { 'x-slo-ms': '3000' });
    assert.equal(ok.statusCode, 200);
    await ok.body.json();
    // Four at once against a bound of three held requests: the last is refused.
    const burst = await Promise.all([0, 1, 2, 3].map((i) => post({ prompt: `burst ${i}`, max_tokens: 30 })));
    const statuses = burst.map((r) => r.statusCode).sort();
    await Promise.all(burst.map((r) => r.body.text()));
    assert.deepEqual(statuses, [200, 200, 200, 503]);
  } finally {
    await server.close();
  }
  const text = readFileSync(file, 'utf8');
  const rows = text.trim().split('\n').map((l) => JSON.parse(l) as TraceRow);
  rmSync(dir, { recursive: true, force: true });

  // The rows round-trip into the training matrix: refusals dropped, features in FEATURE_NAMES order.
  const ds = toDataset(parseTrace(text, 'trace.jsonl').map((row) => ({ row, round: 'r0', rate: 1 })), 'e2e');
  const admitted = rows.filter((r) => r.admitted && !r.censored);
  assert.equal(ds.numRows, admitted.length);
  assert.equal(ds.numDropped, 1);
  admitted.forEach((r, i) => {
    assert.deepEqual([...ds.x.subarray(i * NUM_FEATURES, (i + 1) * NUM_FEATURES)], FEATURE_NAMES.map((n) => r.features[n]));
    assert.equal(ds.y[i], r.e2e_ms);
  });
  assert.equal(rows.length, 2 + 3 + 1);
  for (const r of rows) assert.deepEqual(Object.keys(r.features), [...FEATURE_NAMES]);
  const first = rows.filter((r) => r.slo_ms === 3000);
  assert.deepEqual(first.map((r) => r.choice).sort(), [0, 1]);
  for (const r of first) {
    assert.equal(r.outcome, 'length');
    assert.equal(r.output_tokens, 6);
    assert.equal(r.censored, false);
    assert.ok(r.e2e_ms! > 0 && r.ttft_ms! > 0 && r.ttft_ms! <= r.e2e_ms!);
    assert.equal(r.features.choices, 2);
    // The rule that decided, and the arithmetic's estimate it read, ride along for reading a run.
    assert.equal(typeof r.reason, 'string');
    assert.ok(r.estimate_ms === null || r.estimate_ms! > 0, `estimate_ms ${String(r.estimate_ms)}`);
    assert.ok('estimate_ms' in r && 'estimate_prefill_ms' in r);
    assert.equal(r.features.prompt_tokens, r.features.new_prefill_tokens + r.features.cached_tokens);
  }
  const refused = rows.filter((r) => r.outcome === 'refused');
  assert.equal(refused.length, 1);
  assert.equal(refused[0]!.admitted, false);
  assert.equal(refused[0]!.censored, true);
  assert.ok(refused[0]!.features.waiting + refused[0]!.features.running >= 1, 'the refused one saw the held work');
});

test("trace rows carry the deciding rule and the arithmetic's estimate with its prefill part, from the decision", async () => {
  const dir = mkdtempSync(join(tmpdir(), 'headroom-trace-'));
  const file = join(dir, 'trace.jsonl');
  const w = new TraceWriter(file);
  const ctx = { requestId: 'r', arrivalMs: 0, sloMs: 4000, numPromptTokens: 10, numCachedTokens: 0, maxTokens: 5, n: 1, numMessages: 1, ttftBudgetMs: null };
  const memo = { e2ePredictionMs: null, ttftPredictionMs: null, sloMs: 4000, ttftBudgetMs: null, coldEstimateMs: 2500, coldPrefillMs: 900 };
  const admitted = { admit: true, boundMs: null, reason: 'cold_start', memo } as AdmissionDecision;
  const refused = { admit: false, boundMs: null, reason: 'uncalibrated', memo: { ...memo, coldEstimateMs: 6000, coldPrefillMs: 3000 } } as unknown as AdmissionDecision;
  const t = { requestId: 'r', arrivalMs: 0, deadlineMs: 4000, scheduledMs: 1, firstTokenMs: 900, finishedMs: 1200, numPromptTokens: 10, maxTokens: 5, numCachedTokens: 0, numOutputTokens: 5, numPreemptions: 0, outcome: 'length' } as RequestTimeline;
  const x = new Float64Array(NUM_FEATURES);
  w.finished(ctx, x, admitted, 0, t);
  w.refused({ ...ctx, requestId: 's' }, x, refused);
  w.refused({ ...ctx, requestId: 'u' }, x, null);
  await w.close();
  const rows = readFileSync(file, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as TraceRow);
  rmSync(dir, { recursive: true, force: true });
  assert.deepEqual(rows.map((r) => [r.reason, r.estimate_ms, r.estimate_prefill_ms]), [['cold_start', 2500, 900], ['uncalibrated', 6000, 3000], [undefined, undefined, undefined]]);
});
