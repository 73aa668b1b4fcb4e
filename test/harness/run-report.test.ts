// `bench run --report` against the sleep stub (a few seconds of arrivals, more than its capacity so
// some are refused): the run writes one self-contained HTML page, and headless Chromium (Debian's
// `chromium`) lays it out with every figure drawn — a copy of the page with a probe script appended
// reports, from the browser's own layout, each figure's size, its drawn lines and its legend — and
// a screenshot of it holds far more than one of a blank page. Writing the page again from the
// folder gives the same bytes.
// `.ci/run` installs the browser when missing. Elsewhere, without it, the browser half is skipped
// with a reason; under CI (CI=true) a missing browser fails it instead.

import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { test } from 'node:test';
import { dumpDom, chromiumForTest, screenshot } from '../helpers/chromium.ts';
import { runCli } from '../cli/run-cli.ts';
import { startStubServer } from '../../src/harness/stub-server.ts';
import { writeRunReport } from '../../src/harness/run-report/write.ts';

/** Figure id -> the legend labels it must show and how many lines it must draw. */
const FIGURES: Record<string, { legend: string[]; numLines: number }> = {
  'latency-cdf': { legend: ['TTFT', 'E2E'], numLines: 2 },
  'goodput-slo': { legend: [], numLines: 1 },
  'rates-over-time': { legend: ['arrivals/s', 'completed/s', 'refused/s'], numLines: 3 },
  'latency-over-time': { legend: ['TTFT p50', 'E2E p50', 'E2E p99'], numLines: 3 },
  'tokens-over-time': { legend: ['chunks/s'], numLines: 1 },
};

interface Probe {
  id: string;
  width: number;
  height: number;
  /** Line paths with a non-empty bounding box, i.e. drawn. */
  numLines: number;
  legend: string[];
}

// Runs in the page: what the browser laid out for each figure.
const PROBE = `<script>
const out = [...document.querySelectorAll('figure')].map((f) => {
  const svg = f.querySelector('svg');
  const box = svg === null ? { width: 0, height: 0 } : svg.getBoundingClientRect();
  const lines = [...f.querySelectorAll('.mark-line.role-mark path')].filter((p) => { const b = p.getBBox(); return b.width > 0; });
  const legend = [...f.querySelectorAll('.role-legend-label text')].map((t) => t.textContent);
  return { id: f.id.replace(/^fig-/, ''), width: box.width, height: box.height, numLines: lines.length, legend };
});
const pre = document.createElement('pre');
pre.id = 'probe';
pre.textContent = JSON.stringify(out);
document.body.append(pre);
</script>`;

const unescape = (s: string): string => s.replaceAll('&lt;', '<').replaceAll('&gt;', '>').replaceAll('&quot;', '"').replaceAll('&amp;', '&');

test('bench run --report writes one self-contained page whose figures headless Chromium draws', { timeout: 180_000 }, async (t) => {
  const stub = await startStubServer({ slots: 2, ttftMs: 20, tokenMs: 5, maxOutputTokens: 4, queueLimit: 1 });
  t.after(() => stub.close());
  const dir = mkdtempSync(join(tmpdir(), 'headroom-run-report-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const out = join(dir, 'run');
  const r = await runCli(
    ['bench', 'run', '--url', stub.url, '--rate', '80', '--duration-s', '3', '--warmup-s', '0.5', '--workload', 'uniform', '--prompt-tokens', '8', '--output-tokens', '4',
      '--slo', '100', '--max-slip-p99-ms', '1000', '--out', out, '--report', '--json', '--no-progress'],
    {},
    120_000,
  );
  assert.equal(r.code, 0, r.stderr);
  const file = join(out, 'report.html');
  assert.match(r.stderr, /report in .*report\.html/);

  const html = readFileSync(file, 'utf8');
  const ids = [...html.matchAll(/<figure id="fig-([a-z-]+)"><svg /g)].map((m) => m[1]);
  assert.deepEqual(ids, Object.keys(FIGURES), 'every figure, inlined as SVG, in order');
  assert.doesNotMatch(html, /<script|src="http|href="http|<img|<link/, 'nothing loaded from elsewhere, no script');
  assert.match(html, /E2EL/, 'the text summary is on the page');

  // A function of the folder and the SLO: written again elsewhere, the same bytes.
  const again = await writeRunReport(out, 100, join(dir, 'elsewhere', 'page.html'));
  assert.equal(readFileSync(again, 'utf8'), html);

  const browser = await chromiumForTest();
  if (browser.bin === null) {
    t.skip(browser.why);
    return;
  }
  const bin = browser.bin;
  const probed = join(dir, 'probed.html');
  writeFileSync(probed, html.replace('</body>', `${PROBE}</body>`));
  const dom = await dumpDom(bin, pathToFileURL(probed).href, { budgetMs: 2000 });
  const json = /<pre id="probe">([^<]*)<\/pre>/.exec(dom)?.[1];
  assert.ok(json !== undefined, 'the probe ran in the page');
  const probes = JSON.parse(unescape(json)) as Probe[];
  assert.deepEqual(probes.map((p) => p.id), Object.keys(FIGURES));
  for (const p of probes) {
    const want = FIGURES[p.id]!;
    assert.ok(p.width > 300 && p.height > 150, `${p.id}: laid out at ${p.width}x${p.height}`);
    assert.equal(p.numLines, want.numLines, `${p.id}: lines drawn`);
    assert.deepEqual(p.legend, want.legend, `${p.id}: legend`);
  }

  // The screenshot of the page holds far more than one of a blank page of the same size.
  const size = { width: 1280, height: 2600 };
  const blank = join(dir, 'blank.html');
  writeFileSync(blank, '<!doctype html><html><body></body></html>');
  await screenshot(bin, pathToFileURL(file).href, join(dir, 'page.png'), size);
  await screenshot(bin, pathToFileURL(blank).href, join(dir, 'blank.png'), size);
  const png = readFileSync(join(dir, 'page.png'));
  assert.deepEqual([...png.subarray(0, 4)], [0x89, 0x50, 0x4e, 0x47], 'a PNG');
  const blankBytes = statSync(join(dir, 'blank.png')).size;
  assert.ok(png.length > 10 * blankBytes, `screenshot ${png.length} bytes vs a blank page's ${blankBytes}`);
});
