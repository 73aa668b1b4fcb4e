// `headroom report` on the committed studies (the mock-runner smoke study and the real ladder on
// the tiny model): regenerating from the same data gives byte-identical tables, Markdown, HTML and
// SVG (and the committed report is exactly what the data gives, so a hand edit or a stale report
// fails here); every figure is a valid SVG and PNG.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Resvg } from '@resvg/resvg-js';
import { spawnSync } from 'node:child_process';
import { cliEnv, runCli } from './cli/run-cli.ts';

const STUDIES = ['results/ladder/mock-smoke', 'results/ladder/tiny-1t'];

/** Every generated file except PNGs (font rasterisation may differ between machines), by relative path. */
function textFiles(dir: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const e of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    if (!e.isFile() || e.name.endsWith('.png')) continue;
    const p = path.join(e.parentPath, e.name);
    out.set(path.relative(dir, p), readFileSync(p, 'utf8'));
  }
  return out;
}

for (const NAME of STUDIES) {
  const STUDY = path.join(...NAME.split('/'));
  test(`${NAME}: the report is a deterministic function of the study data, and the committed one matches it`, { timeout: 120_000 }, () => {
    const tmp = mkdtempSync(path.join(os.tmpdir(), 'headroom-report-'));
    try {
      // The copy sits at the same relative path, so the study is named exactly as in the committed report.
      const copy = path.join(tmp, NAME);
      cpSync(STUDY, copy, { recursive: true });
      const report = () => spawnSync(process.execPath, [path.resolve('bin/headroom.mjs'), 'report', NAME], { cwd: tmp, env: cliEnv(), encoding: 'utf8', timeout: 100_000 });
      const first = report();
      assert.equal(first.status, 0, first.stderr);
      const a = textFiles(path.join(copy, 'report'));
      const second = report();
      assert.equal(second.status, 0, second.stderr);
      const b = textFiles(path.join(copy, 'report'));
      assert.ok(a.size >= 14, `expected tables, figures, report.md and report.html, got ${[...a.keys()].join(', ')}`);
      assert.deepEqual([...b.keys()].sort(), [...a.keys()].sort());
      for (const [k, v] of a) assert.equal(b.get(k), v, `${k} differs between two regenerations`);
      const committed = textFiles(path.join(STUDY, 'report'));
      for (const [k, v] of a) assert.equal(committed.get(k), v, `committed ${k} does not match its data: run headroom report ${NAME}`);
      if (NAME.endsWith('mock-smoke')) assert.match(a.get('report.md')!, /MOCK RUNNER/);
      else assert.doesNotMatch(a.get('report.md')!, /MOCK RUNNER/);
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
  });

  test(`${NAME}: every figure is a valid SVG and PNG`, () => {
    const figs = path.join(STUDY, 'report', 'figures');
    const svgs = readdirSync(figs).filter((f) => f.endsWith('.svg')).sort();
    assert.deepEqual(svgs, ['goodput.svg', 'p99-e2e.svg', 'probe.svg', 'refused.svg']);
    for (const f of svgs) {
      const svg = readFileSync(path.join(figs, f), 'utf8');
      assert.match(svg, /^<svg [^>]*xmlns="http:\/\/www.w3.org\/2000\/svg"/, f);
      assert.match(svg, /<\/svg>$/, f);
      // resvg parses it (throws on malformed SVG) and it has a size.
      const r = new Resvg(svg);
      assert.ok(r.width > 100 && r.height > 100, f);
      const png = readFileSync(path.join(figs, f.replace(/\.svg$/, '.png')));
      assert.deepEqual([...png.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], `${f}: PNG signature`);
      assert.equal(png.subarray(12, 16).toString('latin1'), 'IHDR');
      assert.ok(png.readUInt32BE(16) > 100 && png.readUInt32BE(20) > 100, `${f}: PNG size`);
    }
    const html = readFileSync(path.join(STUDY, 'report', 'report.html'), 'utf8');
    assert.equal((html.match(/<svg /g) ?? []).length, 4, 'the HTML inlines every figure (self-contained)');
    assert.doesNotMatch(html, /<script|src="http|href="http/, 'nothing loaded from elsewhere');
  });
}

test('report on a folder that is not a study is one clear line', async () => {
  const r = await runCli(['report', os.tmpdir()]);
  assert.equal(r.code, 1);
  assert.match(r.stderr, /expected a ladder study \(ladder\.json\)/);
  assert.equal(r.stderr.trim().split('\n').length, 1);
});
