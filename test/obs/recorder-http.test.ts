// A mock-runner server with a flight recorder: the requests it served and the ones it refused are
// in the recording, readable, and agree with what the clients saw and with the step records; the
// dashboard's endpoints open that run by name and refuse names they do not know. A bad --record
// path stops `headroom serve` at startup with the flag named.

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { startTestServer } from '../helpers/headroom.ts';
import { spawnServe } from '../helpers/serve-process.ts';
import { readRecording } from '../../src/obs/recorder/reader.ts';
import type { DashboardData } from '../../src/obs/dashboard-data.ts';
import { complete } from './util.ts';

const MAX_TOKENS = 12;

test('a recording server writes the steps, finishes, decisions and refusals of the requests it saw', { timeout: 60_000 }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'headroom-rec-http-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  // Slow enough steps and a queue of 3 so a burst of 10 has some refused for capacity.
  const s = await startTestServer({ mock: { cost: { speed: 1, stepOverheadMs: 4, decodeSeqMs: 0.5 } }, scheduler: { scheduler: 'continuous' }, maxQueuedRequests: 3, record: { dir, flushMs: 50 } });
  let closed = false;
  t.after(async () => {
    if (!closed) await s.close();
  });
  const results = await Promise.all(Array.from({ length: 10 }, (_, i) => complete(s.url, { prompt: `request number ${i}`, max_tokens: MAX_TOKENS, ignore_eos: true })));
  const numOk = results.filter((r) => r.status === 200).length;
  const numRefused = results.filter((r) => r.status === 503).length;
  assert.equal(numOk + numRefused, 10, `statuses ${results.map((r) => r.status).join(',')}`);
  assert.ok(numRefused >= 1 && numOk >= 3, `ok ${numOk}, refused ${numRefused}`);

  const recorder = s.headroom.recorder;
  assert.ok(recorder !== null);
  await recorder.flush();

  // The dashboard opens the run by name while the server still runs.
  const runs = (await (await fetch(`${s.url}/dashboard/runs`)).json()) as { runs: string[] };
  assert.deepEqual(runs.runs, [recorder.runName]);
  const res = await fetch(`${s.url}/dashboard/data?run=${recorder.runName}`);
  assert.equal(res.status, 200);
  const data = (await res.json()) as DashboardData;
  assert.equal(data.mode, 'run');
  assert.equal(data.numRequests, 10);
  assert.equal(data.numRefused, numRefused);
  assert.equal(data.requests.length, numOk);
  const total = (perS: readonly number[]): number => Math.round(perS.reduce((a, b) => a + b, 0) * data.series.bucketS);
  assert.equal(total(data.series.admitted), numOk);
  assert.equal(total(data.series.refused), numRefused);
  const missing = await fetch(`${s.url}/dashboard/data?run=no-such-run`);
  assert.equal(missing.status, 404);
  assert.equal(((await missing.json()) as { error: { code: string } }).error.code, 'route_not_found');
  const bad = await fetch(`${s.url}/dashboard/data?run=..%2Fetc`);
  assert.equal(bad.status, 400);
  const page = await fetch(`${s.url}/dashboard`);
  assert.equal(page.status, 200);
  assert.match(page.headers.get('content-type') ?? '', /text\/html/);
  assert.match(await page.text(), /data-status="loading"/);
  const live = (await (await fetch(`${s.url}/dashboard/data`)).json()) as DashboardData;
  assert.equal(live.mode, 'live');
  assert.equal(live.numRequests, 10);

  await s.close();
  closed = true;
  const rec = await readRecording(recorder.runDir);
  assert.equal(rec.header.meta['runner'], 'mock');
  assert.equal(rec.header.meta['model'], 'headroom-mock');
  assert.ok(rec.end !== null, 'closed cleanly: the end record is there');
  assert.equal(rec.end.dropped, 0);
  assert.equal(rec.done.length, numOk);
  assert.equal(rec.refused.length, numRefused);
  assert.ok(rec.refused.every((r) => r.why === 'capacity'));
  assert.equal(rec.decisions.length, 10, 'one decision per request, refused ones included');
  assert.ok(rec.done.every((d) => d.o === 'length' && d.n === MAX_TOKENS && d.fin !== null && d.ft !== null && d.arr <= d.ft && d.ft <= d.fin));
  // The steps account for exactly the served requests: each arrived once, gained MAX_TOKENS tokens, finished once.
  const ids = new Set(rec.done.map((d) => d.id));
  const arrived = rec.steps.flatMap((st) => st.a);
  assert.deepEqual(new Set(arrived), ids);
  assert.equal(arrived.length, ids.size);
  const gained = new Map<string, number>();
  const finishes = new Map<string, string>();
  for (const st of rec.steps) {
    assert.equal(st.ok, 1);
    for (const [id, n, fin] of st.o) {
      gained.set(id, (gained.get(id) ?? 0) + n);
      if (fin !== null) finishes.set(id, fin);
    }
    for (const [id] of st.r) assert.ok(ids.has(id), `a step row for ${id}, which never finished`);
  }
  for (const id of ids) {
    assert.equal(gained.get(id), MAX_TOKENS, id);
    assert.equal(finishes.get(id), 'length', id);
  }
  // Step indices are consecutive from the first recorded one.
  rec.steps.forEach((st, k) => assert.equal(st.i, rec.steps[0]!.i + k));
});

test('serve --record refuses a path that is not a writable directory, naming the flag', { timeout: 30_000 }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'headroom-rec-cli-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'a-file');
  writeFileSync(file, '');
  const s = spawnServe(['--runner', 'mock', '--host', '127.0.0.1', '--port', '0', '--record', file]);
  const { code } = await s.exited;
  assert.equal(code, 1);
  assert.match(s.stderr(), /--record: cannot record to .*a-file: it is not a directory/);
  const s2 = spawnServe(['--runner', 'mock', '--host', '127.0.0.1', '--port', '0', '--record', dir, '--record-max-bytes', '10']);
  assert.equal((await s2.exited).code, 1);
  assert.match(s2.stderr(), /--record-max-bytes: expected at least 4096 bytes, got '10'/);
});
