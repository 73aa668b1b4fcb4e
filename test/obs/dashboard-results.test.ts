// The dashboard opens a committed benchmark result (`headroom bench run`'s records.parquet) as a
// run: every request row is counted, shed rows as refusals, the others as latency points, and the
// SLO comes from the target's /stats in meta.json. Run names nest one level and never escape.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { startTestServer } from '../helpers/headroom.ts';
import { readRecords } from '../../src/harness/store.ts';
import type { DashboardData } from '../../src/obs/dashboard-data.ts';

const RESULTS = 'results/gate';
const RUN = 'pass-run/rate-3';

test('a benchmark result folder is a dashboard run', { timeout: 60_000 }, async (t) => {
  const s = await startTestServer({ dashboardRuns: [RESULTS] });
  t.after(() => s.close());
  const runs = (await (await fetch(`${s.url}/dashboard/runs`)).json()) as { runs: string[] };
  assert.ok(runs.runs.includes(RUN), runs.runs.join(', '));
  const res = await fetch(`${s.url}/dashboard/data?run=${encodeURIComponent(RUN)}`);
  assert.equal(res.status, 200);
  const d = (await res.json()) as DashboardData;
  const rows = await readRecords(`${RESULTS}/${RUN}`);
  const shed = rows.filter((r) => r.outcome === 'shed').length;
  assert.equal(d.numRequests, rows.length);
  assert.equal(d.numRefused, shed);
  assert.equal(d.requests.length, rows.length - shed);
  assert.equal(d.facts['source'], 'benchmark result');
  assert.equal(d.sloMs, 2000);
  assert.equal(Math.round(d.series.refused.reduce((a, b) => a + b, 0) * d.series.bucketS), shed);
  for (const bad of ['../gate', 'a/b/c', '/etc']) {
    const r = await fetch(`${s.url}/dashboard/data?run=${encodeURIComponent(bad)}`);
    assert.equal(r.status, 400, bad);
  }
  assert.equal((await fetch(`${s.url}/dashboard/data?run=pass-run`)).status, 404, 'a folder of runs is not a run');
});
