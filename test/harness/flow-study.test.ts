// The flow-control study end to end on the mock runner: a 2-point study (one request cap, two
// matched repeats, so the median is not just a copy of one row) through real `headroom serve`
// replicas and a real `headroom gateway`. Checks every evidence file exists with its header, that
// the row counts agree across files, and that analysis.json's matched medians are what
// recomputing them from summary.csv gives.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { readCsv } from '../../src/harness/flow-study/csv.ts';
import { EVIDENCE_COLUMNS, REQUEST_COLUMNS, TRAFFIC_COLUMNS } from '../../src/harness/flow-study/evidence.ts';
import { SUMMARY_COLUMNS } from '../../src/harness/flow-study/points.ts';
import { SYSTEM_COLUMNS } from '../../src/harness/flow-study/sampler.ts';
import { FILES, runStudy } from '../../src/harness/flow-study/study.ts';
import { ADMISSION_COLUMNS } from '../../src/harness/flow-study/write-analysis.ts';

const REPLICAS = 2;
const INTERVAL_MS = 500;

/** The median the test expects, computed here independently of analysis.ts. */
function median(xs: number[]): number | null {
  const s = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (s.length === 0) return null;
  const mid = (s.length - 1) / 2;
  return (s[Math.floor(mid)]! + s[Math.ceil(mid)]!) / 2;
}

test('a 2-point mock study writes consistent evidence files and analysis.json medians match summary.csv', { timeout: 120_000 }, async () => {
  const outDir = await mkdtemp(path.join(tmpdir(), 'headroom-flow-study-'));
  try {
    await runStudy({
      outDir, runner: 'mock', model: null, replicas: REPLICAS, replicaFlags: [], phases: ['request-sweep'],
      requestCaps: [2], concurrency: 6, mixedConcurrency: 6, tokenLevels: [1], repeats: 2, toleranceShare: 0.05, openRateShares: [],
      seed: 7, command: 'test', log: () => {},
      env: {
        durationS: 3, warmupS: 0.5, cooldownS: 0.25, timeoutS: 30, tokensPerWord: 3.9, contextTokens: 0, mix: [1, 1, 1],
        promptTokens: 64, outputTokens: 16, gammaShape: 1, flowQueueSize: 64, flowQueueTtlMs: 5000, sampleIntervalMs: INTERVAL_MS,
        minRowsForP95: 5, maxSlipP99Ms: 25,
      },
    });
    for (const f of Object.values(FILES)) assert.ok(existsSync(path.join(outDir, f)), `${f} exists`);
    const read = (f: string): ReturnType<typeof readCsv> => readCsv(path.join(outDir, f));
    const summary = await read(FILES.summary);
    const admission = await read(FILES.admission);
    const requests = await read(FILES.requests);
    const traffic = await read(FILES.traffic);
    const system = await read(FILES.system);
    const evidence = await read(FILES.evidence);
    assert.deepEqual(summary.header, [...SUMMARY_COLUMNS]);
    assert.deepEqual(admission.header, [...ADMISSION_COLUMNS]);
    assert.deepEqual(requests.header, [...REQUEST_COLUMNS]);
    assert.deepEqual(traffic.header, [...TRAFFIC_COLUMNS]);
    assert.deepEqual(system.header, [...SYSTEM_COLUMNS]);
    assert.deepEqual(evidence.header, [...EVIDENCE_COLUMNS]);

    // One summary row and one evidence row per point, the same points in the same order.
    const ids = summary.rows.map((r) => r['point_id']);
    assert.deepEqual(ids, ['request-sweep/request-2/r1', 'request-sweep/request-2/r2']);
    assert.deepEqual(evidence.rows.map((r) => r['point_id']), ids);
    assert.equal(admission.rows.length, 0, 'no mixed phase ran');
    for (const id of ids) {
      const ev = evidence.rows.find((r) => r['point_id'] === id)!;
      const reqs = requests.rows.filter((r) => r['point_id'] === id);
      assert.equal(reqs.length, Number(ev['num_rows']), `${id}: request rows = evidence num_rows`);
      assert.ok(reqs.length > 0);
      const ticks = traffic.rows.filter((r) => r['point_id'] === id);
      const last = ticks[ticks.length - 1]!;
      assert.equal(Number(last['issued']), reqs.length, `${id}: the last traffic tick has issued every request`);
      assert.equal(Number(last['completed']), reqs.length);
      assert.equal(Number(last['refused']), reqs.filter((r) => r['outcome'] === 'shed').length);
      ticks.forEach((t, i) => assert.equal(Number(t['t_s']), (i * INTERVAL_MS) / 1000, `${id}: traffic ticks every ${INTERVAL_MS} ms`));
      const sys = system.rows.filter((r) => r['point_id'] === id);
      const gw = sys.filter((r) => r['source'] === 'gateway');
      assert.ok(gw.length >= 4, `${id}: the gateway was sampled through the run`);
      assert.equal(sys.length, gw.length * (1 + REPLICAS), `${id}: one row per replica per gateway tick`);
      assert.ok(gw.some((r) => Number(r['flow_inflight_requests']) === 2), `${id}: the cap of 2 was reached`);
      assert.ok(gw.every((r) => !(Number(r['flow_inflight_requests']) > 2)), `${id}: never over the cap`);
      // Prefix cache off, verified both ways, and traffic reached both replicas.
      assert.equal(ev['prefix_cache_config_off'], 'true');
      assert.equal(ev['prefix_cache_hit_tokens'], '0');
      assert.equal(ev['prefix_cache_query_tokens'], '0');
      assert.match(ev['routes'] ?? '', /^replica-0:[1-9]\d*;replica-1:[1-9]\d*$/);
      assert.equal(ev['gates_passed'], 'true', `${id}: gates ${JSON.stringify(ev)}`);
      assert.equal(summary.rows.find((r) => r['point_id'] === id)!['label'], 'selected');
    }

    // analysis.json's medians are the medians of summary.csv's gated rows, per configuration.
    const analysis = JSON.parse(await readFile(path.join(outDir, FILES.analysis), 'utf8')) as {
      matched_medians: Array<{ phase: string; config: string; num_repeats: number; medians: Record<string, number | null> }>;
      decision: { request_cap: number };
    };
    assert.equal(analysis.matched_medians.length, 1);
    const m = analysis.matched_medians[0]!;
    const rows = summary.rows.filter((r) => r['phase'] === m.phase && r['config'] === m.config && r['gates_passed'] === 'true');
    assert.equal(m.num_repeats, rows.length);
    assert.equal(rows.length, 2);
    for (const metric of ['steady_rps', 'p50_ttft_ms', 'p95_ttft_ms', 'p99_ttft_ms', 'rate_429', 'input_tokens_per_s']) {
      const want = median(rows.map((r) => (r[metric] === '' ? NaN : Number(r[metric]))));
      assert.ok(want !== null, `${metric} measured`);
      assert.ok(Math.abs((m.medians[metric] ?? NaN) - want) <= 1e-9 * Math.max(1, Math.abs(want)), `${metric}: analysis ${m.medians[metric]} vs recomputed ${want}`);
    }
    assert.equal(analysis.decision.request_cap, 2);
    const report = await readFile(path.join(outDir, FILES.report), 'utf8');
    assert.match(report, /MOCK-RUNNER SMOKE RUN/);
    assert.match(report, /\| request-2 \| 2 \| selected \|/);
  } finally {
    await rm(outDir, { recursive: true, force: true });
  }
});
