// Natural-length workloads: requests that end at EOS at a length admission cannot read. The bias
// arithmetic, the request bodies (no ignore_eos; temperature 1, the EOS bias, a seed, the cap),
// and a short run through the real harness against the mock runner, whose output lengths must
// vary and average the target within a tolerance sized from the sample.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { cappedGeometric, eosBias, eosProbability } from '../../src/harness/natural-length.ts';
import { NATURAL_WORKLOADS, Workload } from '../../src/harness/workloads.ts';
import type { WorkloadOptions } from '../../src/harness/workloads.ts';
import { requestBody } from '../../src/harness/client.ts';
import type { ClientOptions } from '../../src/harness/client.ts';
import type { BenchConfig } from '../../src/harness/run.ts';
import { runBench } from '../../src/harness/run.ts';
import { startTestServer } from '../helpers/headroom.ts';
import { EOS_ID, MOCK_VOCAB_SIZE } from '../../src/engine/runner/mock/mock-tokenizer.ts';

const EOS = { eosTokenId: 7, vocabSize: 32_000 };
const opts = (kind: WorkloadOptions['kind'], over: Partial<WorkloadOptions> = {}): WorkloadOptions => ({
  kind, seed: 5, tokensPerWord: 1, contextTokens: 0, mix: [1, 1, 1], promptTokens: 64, outputTokens: 128, eos: EOS, ...over,
});
const client: ClientOptions = { origin: 'http://127.0.0.1:1', path: '/v1/chat/completions', model: 'm', timeoutMs: 1000, sloHeaderMs: null, ignoreEos: true };

test('the EOS bias gives each step probability 1/mean under flat logits; the capped geometric mean and sd match a direct sum', () => {
  for (const [mean, v] of [[133, 32_000], [40, MOCK_VOCAB_SIZE], [2, 8000]] as const) {
    assert.ok(Math.abs(eosProbability(eosBias(mean, v), v) - 1 / mean) < 1e-12, `mean ${mean} V ${v}`);
  }
  assert.throws(() => eosBias(1, 100), /mean output length > 1/);
  const p = 0.05;
  const cap = 30;
  let mean = 0;
  let second = 0;
  for (let k = 1; k <= 2000; k++) {
    const prob = (1 - p) ** (k - 1) * p;
    mean += Math.min(k, cap) * prob;
    second += Math.min(k, cap) ** 2 * prob;
  }
  const g = cappedGeometric(p, cap);
  assert.ok(Math.abs(g.mean - mean) < 1e-9 && Math.abs(g.sd - Math.sqrt(second - mean * mean)) < 1e-9, JSON.stringify(g));
  assert.deepEqual(cappedGeometric(0.5, null), { mean: 2, sd: Math.sqrt(0.5) / 0.5 });
});

test('natural workloads: the base workload\'s prompts, no ignore_eos, temperature 1, one EOS bias, a seed per request, the cap', () => {
  for (const [kind, w] of Object.entries(NATURAL_WORKLOADS) as [keyof typeof NATURAL_WORKLOADS, (typeof NATURAL_WORKLOADS)[keyof typeof NATURAL_WORKLOADS]][]) {
    const natural = new Workload(opts(kind));
    const base = new Workload(opts(w.base));
    const seeds = new Set<number>();
    for (let i = 0; i < 200; i++) {
      const n = natural.next();
      const b = base.next();
      assert.deepEqual(n.messages, b.messages, `${kind}: the same prompts as ${w.base} for the same seed`);
      const body = JSON.parse(requestBody(n, client)) as Record<string, unknown>;
      assert.equal(body['ignore_eos'], undefined, `${kind}: never ignore_eos, even when the run asks for it`);
      assert.equal(body['temperature'], 1);
      assert.deepEqual(body['logit_bias'], { [EOS.eosTokenId]: eosBias(w.meanTokens, EOS.vocabSize) });
      assert.equal(body['max_tokens'], w.capTokens ?? undefined, `${kind}: max_tokens is the cap${w.capTokens === null ? ', not sent' : ''}`);
      assert.equal(Object.hasOwn(body, 'max_tokens'), w.capTokens !== null);
      seeds.add(body['seed'] as number);
    }
    assert.ok(seeds.size > 190, `${kind}: seeds differ between requests (${seeds.size} distinct)`);
  }
  const chosen = JSON.parse(requestBody(new Workload(opts('chat-natural', { naturalMeanTokens: 20 })).next(), client)) as { logit_bias: Record<string, number> };
  assert.deepEqual(chosen.logit_bias, { 7: eosBias(20, EOS.vocabSize) }, 'the mean can be chosen');
  const fixed = JSON.parse(requestBody(new Workload(opts('chat')).next(), client)) as Record<string, unknown>;
  assert.equal(fixed['ignore_eos'], true, 'fixed-length workloads are unchanged');
  assert.equal(fixed['logit_bias'], undefined);
  const { eos: _eos, ...noEos } = opts('chat-natural');
  assert.throws(() => new Workload(noEos), /chat-natural needs the target's EOS token/);
});

test('chat-natural on the mock runner: lengths end at EOS, vary, and average the target within four standard errors', async () => {
  const meanTokens = 40;
  const cap = NATURAL_WORKLOADS['chat-natural'].capTokens;
  const server = await startTestServer({ mock: { contextTokens: 1 << 17, maxSequences: 256 } });
  const dir = await mkdtemp(path.join(tmpdir(), 'natural-'));
  try {
    const cfg: BenchConfig = {
      url: server.url, path: '/v1/chat/completions', model: null, loop: 'open', arrival: 'poisson', rate: 150, gammaShape: 1, concurrency: 1,
      durationS: 2, warmupS: 0, cooldownS: 0, timeoutS: 120, seed: 3, workload: 'chat-natural', tokensPerWord: 1, contextTokens: 0,
      mix: [1, 1, 1], promptTokens: 64, outputTokens: 128, sloHeaderMs: null, ignoreEos: true, maxSlipP99Ms: 1e9, naturalMeanTokens: meanTokens,
    };
    const { records, meta } = await runBench(cfg, dir);
    const natural = (meta['workload'] as { natural_length: Record<string, unknown> }).natural_length;
    assert.equal(natural['eosTokenId'], EOS_ID, 'the probe found the mock\'s EOS');
    assert.equal(natural['vocabSize'], MOCK_VOCAB_SIZE, 'and its vocabulary size');
    assert.ok(records.length >= 150, `${records.length} requests`);
    const lengths = records.map((r) => {
      assert.equal(r.outcome, 'ok', r.error ?? '');
      return r.completion_tokens ?? assert.fail('no usage');
    });
    const n = lengths.length;
    const atCap = lengths.filter((l) => l === cap).length;
    assert.ok(atCap < n / 10, `${atCap} of ${n} ran to the cap`);
    assert.ok(new Set(lengths).size > 20, `lengths vary: ${new Set(lengths).size} distinct`);
    const expected = cappedGeometric(1 / meanTokens, cap);
    const mean = lengths.reduce((s, l) => s + l, 0) / n;
    const tolerance = (4 * expected.sd) / Math.sqrt(n);
    assert.ok(Math.abs(mean - expected.mean) < tolerance, `mean ${mean.toFixed(1)} vs ${expected.mean.toFixed(1)} ± ${tolerance.toFixed(1)} (n ${n})`);
  } finally {
    await rm(dir, { recursive: true, force: true });
    await server.close();
  }
});
