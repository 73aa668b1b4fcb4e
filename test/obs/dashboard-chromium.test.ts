// The dashboard page in a real browser: headless Chromium (Debian's `chromium`) opens a recorded
// run from a mock-runner server, and the page must have drawn that run — one latency point per
// served request, the run's request count on <body> — and a screenshot is saved. The live page
// and an unknown run's error are checked the same way.
// `.ci/run` installs the browser when missing. Elsewhere, without it, this test is skipped with a
// reason; under CI (CI=true) a missing browser fails it instead.

import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { bodyAttribute, countClass, dumpDom, chromiumForTest, screenshot } from '../helpers/chromium.ts';
import { recordRun } from '../helpers/recorded-run.ts';
import { readRecording } from '../../src/obs/recorder/reader.ts';

test('the dashboard draws a recorded run in headless Chromium, and a screenshot is saved', { timeout: 180_000 }, async (t) => {
  const browser = await chromiumForTest();
  if (browser.bin === null) {
    t.skip(browser.why);
    return;
  }
  const bin = browser.bin;
  const dir = mkdtempSync(join(tmpdir(), 'headroom-dash-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const run = await recordRun({ dir, numRequests: 36, ratePerS: 40, maxQueuedRequests: 6 });
  t.after(() => run.server.close());
  const numServed = run.statuses.filter((s) => s === 200).length;
  const numRefused = run.statuses.filter((s) => s === 503).length;
  assert.equal(numServed + numRefused, 36, `statuses: ${run.statuses.join(',')}`);
  assert.ok(numRefused >= 1, 'the burst is refused in part (queue cap)');
  const rec = await readRecording(join(dir, run.runName));
  assert.equal(rec.done.length, numServed);

  const url = `${run.server.url}/dashboard?run=${run.runName}`;
  const dom = await dumpDom(bin, url);
  assert.equal(bodyAttribute(dom, 'data-status'), 'drawn', `the page did not draw; #error: ${/<div id="error">([^<]*)/.exec(dom)?.[1]}`);
  assert.equal(bodyAttribute(dom, 'data-requests'), '36');
  assert.equal(bodyAttribute(dom, 'data-points'), String(numServed));
  assert.equal(countClass(dom, 'req'), numServed, 'one E2E point per served request');
  for (const d of rec.done) assert.ok(dom.includes(`data-id="${d.id}"`), `no point for ${d.id}`);
  assert.match(dom, new RegExp(`flight recording ${run.runName}`));
  assert.equal(countClass(dom, 'decision') > 0 || rec.decisions.every((d) => d.bound === null), true);

  const png = join(dir, 'dashboard.png');
  await screenshot(bin, url, png);
  assert.ok(statSync(png).size > 10_000, 'a screenshot of a drawn page');
  assert.deepEqual([...readFileSync(png).subarray(0, 4)], [0x89, 0x50, 0x4e, 0x47], 'a PNG');

  // Live mode draws the engine's window; an unknown run shows the server's error.
  const live = await dumpDom(bin, `${run.server.url}/dashboard`, { budgetMs: 2500 });
  assert.equal(bodyAttribute(live, 'data-status'), 'drawn');
  assert.equal(bodyAttribute(live, 'data-requests'), '36');
  const missing = await dumpDom(bin, `${run.server.url}/dashboard?run=no-such-run`);
  assert.equal(bodyAttribute(missing, 'data-status'), 'error');
  assert.match(missing, /No recorded run named 'no-such-run'/);
});
