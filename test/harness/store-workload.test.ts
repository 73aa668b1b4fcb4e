import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { readRecords, writeRecords } from '../../src/harness/store.ts';
import type { RequestRecord } from '../../src/harness/record.ts';
import { Workload } from '../../src/harness/workloads.ts';
import type { RequestSpec, WorkloadOptions } from '../../src/harness/workloads.ts';

const row = (over: Partial<RequestRecord>): RequestRecord => ({
  request_id: 0, loop: 'open', worker: null, klass: 'shared', prefix_id: 2, phase: 'warmup', intended_ms: 1.25, sent_ms: 1.5,
  slip_ms: 0.25, headers_ms: 3, ttft_ms: 4.5, e2e_ms: 9, end_ms: 10.25, itl_ms: [1.5, 2], num_chunks: 3, prompt_tokens_est: 500,
  prompt_tokens: 512, completion_tokens: 3, max_tokens: 3, http_status: 200, outcome: 'ok', shed_reason: null, retry_after_s: null,
  error: null, censored: false, ...over,
});

test('records round-trip through Parquet with nulls, lists and flags intact', async () => {
  const dir = await mkdtemp(path.join(tmpdir(), 'bench-store-'));
  try {
    const recs = [
      row({}),
      row({ request_id: 1, prefix_id: null, phase: 'steady', ttft_ms: null, e2e_ms: null, itl_ms: [], http_status: null, outcome: 'timeout', censored: true, prompt_tokens: null, completion_tokens: null, headers_ms: null }),
      row({ request_id: 2, outcome: 'shed', http_status: 503, shed_reason: 'queue_full', retry_after_s: 1.5, loop: 'closed', worker: 4, phase: 'cooldown' }),
    ];
    await writeRecords(dir, recs);
    assert.deepEqual(await readRecords(dir), recs);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

/** max_tokens of a fixed-length workload's request (always sent there). */
const cap = (s: RequestSpec): number => s.maxTokens ?? assert.fail('a fixed-length request without max_tokens');

const opts = (kind: WorkloadOptions['kind'], over: Partial<WorkloadOptions> = {}): WorkloadOptions => ({
  kind, seed: 5, tokensPerWord: 1, contextTokens: 0, mix: [1, 1, 1], promptTokens: 64, outputTokens: 128, ...over,
});

test('chat workload: ~70% on 4 shared prefixes of 480–650 tokens, outputs in [16, 512]', () => {
  const w = new Workload(opts('chat'));
  const specs = Array.from({ length: 2000 }, () => w.next());
  const shared = specs.filter((s) => s.klass === 'shared');
  assert.ok(Math.abs(shared.length / 2000 - 0.7) < 0.04, `shared ${shared.length}`);
  assert.equal(new Set(shared.map((s) => s.messages[0]?.content)).size, 4);
  for (const s of specs) {
    assert.ok(cap(s) >= 16 && cap(s) <= 512);
    const sys = s.messages[0]?.content.split(' ').length ?? 0;
    assert.ok(sys >= 480 && sys <= 655, `system words ${sys}`);
  }
  const median = specs.map(cap).sort((a, b) => a - b)[1000] ?? 0;
  assert.ok(median > 85 && median < 115, `median output ${median} (exp(4.6) ≈ 99)`);
  // Deterministic in the seed.
  const again = new Workload(opts('chat'));
  assert.deepEqual(again.next(), specs[0]);
});

test('mixed workload: three sizes in the given mix, scaled to the context', () => {
  const w = new Workload(opts('mixed', { contextTokens: 4096, mix: [2, 1, 1] }));
  const specs = Array.from({ length: 2000 }, () => w.next());
  const n = (k: string): number => specs.filter((s) => s.klass === k).length;
  assert.ok(Math.abs(n('short') / 2000 - 0.5) < 0.04);
  const long = specs.find((s) => s.klass === 'long');
  assert.ok(long !== undefined && long.promptTokensEst + cap(long) < 4096, `long ${long?.promptTokensEst}`);
  assert.equal(specs.find((s) => s.klass === 'short')?.promptTokensEst, Math.round(512 * w.mixedScale()));
});

test('long workload: half on 2 shared documents plus a question, half unique, 800–2,800 tokens, outputs in [8, 256]', () => {
  const w = new Workload(opts('long'));
  const specs = Array.from({ length: 2000 }, () => w.next());
  const shared = specs.filter((s) => s.klass === 'shared');
  assert.ok(Math.abs(shared.length / 2000 - 0.5) < 0.04, `shared ${shared.length}`);
  assert.equal(new Set(shared.map((s) => s.messages[0]?.content)).size, 2);
  for (const s of specs) {
    assert.ok(cap(s) >= 8 && cap(s) <= 256, `max_tokens ${s.maxTokens}`);
    assert.ok(s.promptTokensEst >= 800 && s.promptTokensEst <= 2800, `prompt ${s.promptTokensEst}`);
    const words = s.messages.map((m) => m.content.split(' ').length).reduce((a, b) => a + b, 0);
    assert.ok(Math.abs(words - s.promptTokensEst) <= 8, `words ${words} vs estimate ${s.promptTokensEst}`);
  }
  assert.ok(specs.some((s) => s.klass === 'unique' && s.promptTokensEst > 2000));
  const median = specs.map(cap).sort((a, b) => a - b)[1000] ?? 0;
  assert.ok(median > 45 && median < 65, `median output ${median} (exp(4.0) ≈ 55)`);
});
