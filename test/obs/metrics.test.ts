// /metrics: buckets built around the SLO, every metric present from the start, counters that count
// what happened (requests, tokens, refusals by reason), gauges that show live state, engine
// counters (prefix cache) carried over on scrape.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SLO_FRACTIONS, sloBuckets, tokenLatencyBuckets } from '../../src/obs/buckets.ts';
import { REFUSAL_REASONS } from '../../src/backend/refusal.ts';
import { startTestServer, waitForIdle } from '../helpers/headroom.ts';
import { complete, pool, sample, scrape, sleep } from './util.ts';

/** Prometheus's histogram_quantile: linear interpolation inside the bucket the rank falls in. */
function interpolatedQuantile(q: number, bounds: readonly number[], values: readonly number[]): number {
  const counts = bounds.map((b) => values.filter((v) => v <= b).length);
  const rank = q * values.length;
  const i = counts.findIndex((c) => c >= rank);
  assert.ok(i >= 0, 'quantile beyond the last bucket');
  const lo = i === 0 ? 0 : bounds[i - 1]!;
  const below = i === 0 ? 0 : counts[i - 1]!;
  return lo + ((bounds[i]! - lo) * (rank - below)) / (counts[i]! - below);
}

test('SLO buckets: the SLO is an exact boundary, dense around it, sorted and unique', () => {
  for (const sloMs of [250, 4000, 10_000]) {
    const b = sloBuckets(sloMs);
    assert.ok(b.includes(sloMs / 1000), `${sloMs} ms: SLO not a boundary`);
    assert.deepEqual(b, [...new Set(b)].sort((x, y) => x - y));
    assert.equal(b.length, SLO_FRACTIONS.length);
    const near = b.filter((x) => x >= 0.4 * (sloMs / 1000) && x <= 1.5 * (sloMs / 1000));
    assert.ok(near.length >= 14, `only ${near.length} boundaries near the SLO`);
  }
  const t = tokenLatencyBuckets(10_000);
  for (let i = 1; i < t.length; i++) assert.ok(t[i]! / t[i - 1]! < 1.27, 'token buckets wider than 2^(1/3)');
  assert.ok(t[t.length - 1]! >= 10);
  assert.throws(() => sloBuckets(0), /expected sloMs > 0/);
});

test('SLO buckets interpolate a p99 near the SLO far better than the default buckets', () => {
  // 98% of requests well inside a 4 s SLO, 2% straddling it: the true p99 sits at the SLO.
  let seed = 7;
  const rand = (): number => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32);
  const values = Array.from({ length: 20_000 }, (_, i) => (i % 50 === 0 ? 3.6 + 0.8 * rand() : 0.5 + 3.1 * rand()));
  const sorted = [...values].sort((a, b) => a - b);
  const truth = sorted[Math.ceil(0.99 * sorted.length) - 1]!;
  const defaults = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, Infinity];
  const errSlo = Math.abs(interpolatedQuantile(0.99, [...sloBuckets(4000), Infinity], values) - truth);
  const errDefault = Math.abs(interpolatedQuantile(0.99, defaults, values) - truth);
  assert.ok(errSlo < 0.05 * 4, `SLO buckets: p99 off by ${errSlo.toFixed(3)} s`);
  assert.ok(errDefault > 0.1 * 4, `default buckets: p99 off by only ${errDefault.toFixed(3)} s`);
});

test('/metrics counts requests, tokens and latencies under both names', async () => {
  const s = await startTestServer({ mock: { cost: { speed: 0.2 } }, scheduler: { scheduler: 'continuous' } });
  try {
    const n = 12;
    const maxTokens = 6;
    const res = await pool(n, 4, (i) => complete(s.url, { prompt: `request number ${i} says hello`, max_tokens: maxTokens }));
    assert.ok(res.every((r) => r.status === 200));
    await waitForIdle(s.headroom);
    const text = await scrape(s.url);
    const m = 'model_name="headroom-mock"';
    assert.equal(sample(text, 'headroom_requests_total', 'outcome="length"'), n);
    assert.equal(sample(text, 'headroom_requests_total', 'outcome="abort"'), 0);
    assert.equal(sample(text, 'vllm:request_success_total', `${m},finished_reason="length"`), n);
    for (const name of ['headroom_time_to_first_token_seconds_count', 'headroom_e2e_request_latency_seconds_count', 'headroom_request_queue_time_seconds_count', 'headroom_admission_decision_seconds_count']) {
      assert.equal(sample(text, name), n, name);
    }
    assert.equal(sample(text, 'vllm:time_to_first_token_seconds_count', m), n);
    assert.equal(sample(text, 'vllm:e2e_request_latency_seconds_count', m), n);
    assert.equal(sample(text, 'headroom_inter_token_latency_seconds_count'), n * (maxTokens - 1));
    assert.equal(sample(text, 'vllm:inter_token_latency_seconds_count', m), n * (maxTokens - 1));
    assert.equal(sample(text, 'vllm:time_per_output_token_seconds_count', m), n * (maxTokens - 1));
    assert.equal(sample(text, 'headroom_generation_tokens_total'), n * maxTokens);
    assert.equal(sample(text, 'vllm:generation_tokens_total', m), n * maxTokens);
    const promptTokens = sample(text, 'headroom_prompt_tokens_total')!;
    assert.ok(promptTokens >= n * 5, `prompt tokens ${promptTokens}`);
    assert.equal(sample(text, 'vllm:prompt_tokens_total', m), promptTokens);
    // vLLM's per-request and per-iteration series, under the names vLLM documents
    // (docs.vllm.ai "Production Metrics"): one observation per request, and per engine step.
    assert.equal(sample(text, 'vllm:request_prompt_tokens_count', m), n);
    assert.equal(sample(text, 'vllm:request_prompt_tokens_sum', m), promptTokens);
    assert.equal(sample(text, 'vllm:request_generation_tokens_count', m), n);
    assert.equal(sample(text, 'vllm:request_generation_tokens_sum', m), n * maxTokens);
    for (const name of ['vllm:request_prefill_time_seconds', 'vllm:request_decode_time_seconds', 'vllm:request_inference_time_seconds']) {
      assert.equal(sample(text, `${name}_count`, m), n, name);
    }
    const stepTokens = sample(text, 'vllm:iteration_tokens_total_sum', m)!;
    assert.equal(stepTokens, promptTokens + n * (maxTokens - 1), 'every prompt token and every decode row, once');
    assert.ok(sample(text, 'vllm:iteration_tokens_total_count', m)! >= maxTokens);
    assert.match(text, /vllm:cache_config_info\{block_size="\d+",num_gpu_blocks="\d+",num_cpu_blocks="0",enable_prefix_caching="(true|false)",cache_dtype="auto",model_name="headroom-mock"\} 1/);
    // TTFT ≤ E2E, and every E2E was observed inside the client's own wall time.
    const sum = (name: string): number => sample(text, `${name}_sum`)!;
    assert.ok(sum('headroom_time_to_first_token_seconds') <= sum('headroom_e2e_request_latency_seconds'));
    assert.ok(sum('headroom_e2e_request_latency_seconds') <= res.reduce((a, r) => a + r.seconds, 0));
    for (const r of REFUSAL_REASONS) assert.equal(sample(text, 'headroom_refusals_total', `reason="${r}"`), 0, r);
    for (const name of ['headroom_requests_waiting', 'headroom_requests_running', 'headroom_preemptions_total', 'headroom_kv_copy_on_write_total']) {
      assert.equal(sample(text, name), 0, name);
    }
    // Idle, the prefix cache still holds blocks: KV gauges say what the engine says.
    const kv = s.headroom.engine.stats().scheduler.kv;
    assert.equal(sample(text, 'headroom_kv_free_blocks'), kv.numFreeBlocks);
    assert.equal(sample(text, 'headroom_kv_blocks'), kv.numBlocks);
    assert.equal(sample(text, 'headroom_kv_usage_ratio'), kv.usage);
    assert.equal(sample(text, 'headroom_kv_fragmentation_ratio'), kv.fragmentation);
    assert.equal(sample(text, 'vllm:kv_cache_usage_perc', m), kv.usage);
    assert.equal(sample(text, 'vllm:num_requests_waiting', m), 0);
    assert.equal(sample(text, 'headroom_slo_seconds'), 10);
    assert.ok(sample(text, 'headroom_engine_step_seconds_count', 'kind="decode"')! > 0);
    assert.match(text, /^headroom_e2e_request_latency_seconds_bucket\{le="10"\} 12$/m, 'the SLO is a bucket boundary');
  } finally {
    await s.close();
  }
});

test('gauges show live queue depth, running batch and KV use while requests run', async () => {
  const s = await startTestServer({ mock: { cost: { speed: 1, decodeSeqMs: 5 }, maxSequences: 2 }, scheduler: { scheduler: 'continuous' } });
  try {
    const inflight = Promise.all(Array.from({ length: 5 }, (_, i) => complete(s.url, { prompt: `slow ${i}`, max_tokens: 40 })));
    let seen = false;
    for (let k = 0; k < 100 && !seen; k++) {
      const text = await scrape(s.url);
      seen = sample(text, 'headroom_requests_running') === 2 && sample(text, 'headroom_requests_waiting')! >= 1 && sample(text, 'headroom_kv_usage_ratio')! > 0;
      if (seen) assert.equal(sample(text, 'vllm:num_requests_running', 'model_name="headroom-mock"'), 2);
      else await sleep(10);
    }
    assert.ok(seen, 'never saw 2 running, ≥1 waiting and KV in use');
    await inflight;
  } finally {
    await s.close();
  }
});

test('refusals are counted by reason: capacity and draining', async () => {
  const s = await startTestServer({ mock: { cost: { speed: 1, decodeSeqMs: 5 } }, maxQueuedRequests: 1 });
  try {
    const res = await Promise.all(Array.from({ length: 4 }, (_, i) => complete(s.url, { prompt: `cap ${i}`, max_tokens: 20 })));
    const refused = res.filter((r) => r.status !== 200).length;
    assert.ok(refused >= 1, 'nothing was refused');
    void s.headroom.engine.drain();
    const late = await complete(s.url, { prompt: 'late', max_tokens: 2 });
    assert.notEqual(late.status, 200);
    const text = await scrape(s.url);
    assert.equal(sample(text, 'headroom_refusals_total', 'reason="capacity"'), refused);
    assert.equal(sample(text, 'headroom_refusals_total', 'reason="draining"'), 1);
    assert.equal(sample(text, 'headroom_refusals_total', 'reason="conformal"'), 0);
    assert.equal(sample(text, 'headroom_draining'), 1);
    assert.equal(sample(text, 'headroom_admission_decision_seconds_count'), 5);
  } finally {
    await s.close();
  }
});

test('prefix-cache tokens from the engine appear as counters under both names', async () => {
  const s = await startTestServer({ scheduler: { scheduler: 'continuous', prefixCache: true } });
  try {
    const prompt = 'a shared system prompt that is long enough to fill several KV blocks of sixteen tokens each, twice over';
    for (let i = 0; i < 3; i++) assert.equal((await complete(s.url, { prompt, max_tokens: 2 })).status, 200);
    const text = await scrape(s.url);
    const kv = s.headroom.engine.stats().scheduler.kv.prefixCache!;
    assert.ok(kv.hitTokens > 0, 'the engine saw no prefix hits');
    assert.equal(sample(text, 'headroom_prefix_cache_hit_tokens_total'), kv.hitTokens);
    assert.equal(sample(text, 'headroom_prefix_cache_query_tokens_total'), kv.queryTokens);
    assert.equal(sample(text, 'vllm:prefix_cache_hits_total', 'model_name="headroom-mock"'), kv.hitTokens);
    assert.equal(sample(text, 'vllm:prefix_cache_queries_total', 'model_name="headroom-mock"'), kv.queryTokens);
    // A second scrape adds only what the engine added since (nothing): counters, not re-sums.
    assert.equal(sample(await scrape(s.url), 'headroom_prefix_cache_hit_tokens_total'), kv.hitTokens);
  } finally {
    await s.close();
  }
});

test('metrics can be switched off: no /metrics route', async () => {
  const { Headroom } = await import('../../src/app.ts');
  const { MockRunner } = await import('../../src/engine/runner/mock/mock-runner.ts');
  const { serverConfig } = await import('../../src/api/config.ts');
  const h = new Headroom({ runner: new MockRunner({ cost: { speed: 0 } }), server: serverConfig({ host: '127.0.0.1', port: 0 }), scheduler: { scheduler: 'fifo' }, maxQueuedRequests: 8, obs: { metrics: false } });
  const url = await h.start();
  try {
    assert.equal((await fetch(`${url}/metrics`)).status, 404);
  } finally {
    await h.close();
  }
});
