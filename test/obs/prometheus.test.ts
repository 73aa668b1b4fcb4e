// A real Prometheus (Debian's `prometheus` binary) scrapes a running Headroom every second while a
// little load runs; its HTTP API must then answer a histogram_quantile over a Headroom histogram
// within the range the client measured, and counters equal to what was sent.
// `.ci/run` installs the binary when missing. Elsewhere, without it, this test is skipped with a
// reason (`npm test` needs no download); under CI (CI=true) a missing binary fails it instead, so
// CI never passes without the real scrape.

import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { startTestServer } from '../helpers/headroom.ts';
import { freePort } from '../helpers/ports.ts';
import { sloBuckets } from '../../src/obs/buckets.ts';
import { complete, pool, sleep } from './util.ts';

const SLO_MS = 200;

/** The request-latency bucket [lower, upper] holding `seconds` (past the last bound: the last bound, where histogram_quantile stops). */
function bucketAround(seconds: number): [number, number] {
  const bounds = sloBuckets(SLO_MS);
  const i = bounds.findIndex((b) => b >= seconds);
  if (i < 0) return [bounds[bounds.length - 1]!, bounds[bounds.length - 1]!];
  return [i === 0 ? 0 : bounds[i - 1]!, bounds[i]!];
}

interface PromVector {
  status: string;
  data: { result: { metric: Record<string, string>; value: [number, string] }[] };
}

async function promQuery(base: string, query: string): Promise<number | null> {
  const res = await fetch(`${base}/api/v1/query?query=${encodeURIComponent(query)}`);
  const body = (await res.json()) as PromVector;
  if (body.status !== 'success') throw new Error(`prometheus: ${JSON.stringify(body)}`);
  const v = body.data.result[0]?.value[1];
  return v === undefined ? null : Number(v);
}

async function poll<T>(what: string, timeoutMs: number, fn: () => Promise<T | null>, ok: (v: T) => boolean = () => true): Promise<T> {
  const t0 = Date.now();
  let last: T | null = null;
  let lastErr: string | null = null;
  while (Date.now() - t0 < timeoutMs) {
    try {
      last = await fn();
      if (last !== null && ok(last)) return last;
    } catch (e) {
      lastErr = e instanceof Error ? e.message : JSON.stringify(e); // not up yet
    }
    await sleep(200);
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}; last value ${JSON.stringify(last)}${lastErr === null ? '' : `, last error ${lastErr}`}`);
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
  await exited;
  clearTimeout(timer);
}

test('Prometheus scrapes Headroom: a TTFT/E2E quantile and request counters come back right', { timeout: 60_000 }, async (t) => {
  try {
    execFileSync('prometheus', ['--version'], { stdio: 'ignore' });
  } catch {
    const why = 'the `prometheus` binary is not installed (apt-get install prometheus; .ci/run does this)';
    if (process.env['CI'] === 'true') assert.fail(why);
    t.skip(why);
    return;
  }
  // Requests of ~50–250 ms around a 200 ms SLO, so the dense buckets are the ones in use.
  const s = await startTestServer({ mock: { cost: { speed: 1, stepOverheadMs: 2, decodeSeqMs: 0.5 } }, scheduler: { scheduler: 'continuous' }, server: { sloMs: SLO_MS } });
  const dir = mkdtempSync(join(tmpdir(), 'headroom-prom-'));
  let prom: ChildProcess | null = null;
  let log = '';
  try {
    const target = new URL(s.url).host;
    const promPort = await freePort();
    const base = `http://127.0.0.1:${promPort}`;
    writeFileSync(
      join(dir, 'prometheus.yml'),
      `global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: headroom\n    metrics_path: /metrics\n    static_configs:\n      - targets: ['${target}']\n`,
    );
    prom = spawn('prometheus', [`--config.file=${join(dir, 'prometheus.yml')}`, `--storage.tsdb.path=${join(dir, 'data')}`, `--web.listen-address=127.0.0.1:${promPort}`, '--log.level=warn'], { stdio: ['ignore', 'pipe', 'pipe'] });
    prom.stdout?.on('data', (d: Buffer) => (log += d.toString()));
    prom.stderr?.on('data', (d: Buffer) => (log += d.toString()));

    await poll('prometheus ready', 20_000, async () => ((await fetch(`${base}/-/ready`)).status === 200 ? true : null));
    await poll('the headroom target up', 20_000, async () => {
      const body = (await (await fetch(`${base}/api/v1/targets`)).json()) as { data: { activeTargets: { health: string }[] } };
      return body.data.activeTargets[0]?.health === 'up' ? true : null;
    });

    const n = 40;
    const maxTokens = 24;
    const res = await pool(n, 8, (i) => complete(s.url, { prompt: `prometheus load ${i}`, max_tokens: maxTokens }));
    assert.ok(res.every((r) => r.status === 200), 'a request failed');
    const e2e = res.map((r) => r.seconds).sort((a, b) => a - b);
    const [minS, maxS] = [e2e[0]!, e2e[e2e.length - 1]!];

    // Counters: wait for a scrape after the load, then they must equal what was sent.
    const finished = await poll('all requests counted', 15_000, () => promQuery(base, 'sum(headroom_requests_total)'), (v) => v === n);
    assert.equal(finished, n);
    assert.equal(await promQuery(base, 'sum(vllm:request_success_total{finished_reason="length"})'), n);
    assert.equal(await promQuery(base, 'sum(headroom_generation_tokens_total)'), n * maxTokens);
    assert.equal(await promQuery(base, 'sum(headroom_refusals_total)'), 0);

    // Quantiles over the whole run (the cumulative histogram, no rate window to race).
    const p50 = (await promQuery(base, 'histogram_quantile(0.5, sum by (le) (headroom_e2e_request_latency_seconds_bucket))'))!;
    const p99 = (await promQuery(base, 'histogram_quantile(0.99, sum by (le) (vllm:e2e_request_latency_seconds_bucket))'))!;
    const ttft = (await promQuery(base, 'histogram_quantile(0.5, sum by (le) (headroom_time_to_first_token_seconds_bucket))'))!;
    const detail = `client E2E [${minS.toFixed(3)}, ${maxS.toFixed(3)}] s; prometheus p50 ${p50.toFixed(3)}, p99 ${p99.toFixed(3)}, TTFT p50 ${ttft.toFixed(3)}`;
    // Server-side E2E is inside the client's wall time, and interpolation stays inside the bucket
    // the true quantile is in: the quantiles land within the buckets around what was measured.
    // (Bucket edges, not a fixed slack: on a loaded machine latencies reach the sparse tail buckets.)
    t.diagnostic(detail);
    const slack = 0.1 * (SLO_MS / 1000);
    const [lo, hi] = [bucketAround(minS - slack)[0], bucketAround(maxS)[1]];
    assert.ok(p50 >= lo && p50 <= hi, `${detail}; buckets [${lo}, ${hi}]`);
    assert.ok(p99 >= p50 && p99 <= hi, `${detail}; buckets [${lo}, ${hi}]`);
    assert.ok(ttft > 0 && ttft < p50, detail);
  } catch (e) {
    if (log !== '') console.error(`prometheus log:\n${log}`);
    throw e;
  } finally {
    if (prom !== null) await stop(prom);
    await s.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
