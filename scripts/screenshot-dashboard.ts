// Regenerates docs/img/dashboard.png: a mock-runner server with the flight recorder and admission
// control on is driven through an overload burst, then headless Chromium opens the recorded run in
// /dashboard and saves the page. Needs Debian's `chromium` (or CHROMIUM=path).
//
//   node --import tsx scripts/screenshot-dashboard.ts [out.png]

import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { dumpDom, findChromium, bodyAttribute, screenshot } from '../test/helpers/chromium.ts';
import { recordRun } from '../test/helpers/recorded-run.ts';

const out = process.argv[2] ?? 'docs/img/dashboard.png';
const bin = await findChromium();
if (bin === null) {
  console.error('screenshot-dashboard: no chromium binary (apt-get install chromium, or set CHROMIUM)');
  process.exit(1);
}
const dir = mkdtempSync(join(tmpdir(), 'headroom-shot-'));
try {
  const run = await recordRun({ dir, numRequests: 300, ratePerS: 30, maxQueuedRequests: 40, sloMs: 1500, admission: { mode: 'conformal', guarantee: 0.9, minOutcomes: 20 } });
  try {
    const url = `${run.server.url}/dashboard?run=${run.runName}`;
    const status = bodyAttribute(await dumpDom(bin, url), 'data-status');
    if (status !== 'drawn') throw new Error(`the page did not draw (data-status ${status})`);
    mkdirSync(dirname(out), { recursive: true });
    await screenshot(bin, url, out, { width: 1280, height: 900 });
    const refused = run.statuses.filter((s) => s !== 200).length;
    console.log(`${out}: run ${run.runName}, ${run.statuses.length} requests, ${refused} refused`);
  } finally {
    await run.server.close();
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
