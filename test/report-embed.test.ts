// scripts/embed-tables.ts against the committed mock-smoke study: it fills a marked block with the
// table regenerated from the data, `--check` passes on the result, fails (exit 1, naming the table)
// once a number in the embedded table is doctored — without touching the file — and a marker that
// names no table is an error (exit 2).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { cliEnv } from './cli/run-cli.ts';

const embed = (...args: string[]) => spawnSync(process.execPath, ['--import', 'tsx', 'scripts/embed-tables.ts', ...args], { env: cliEnv(), encoding: 'utf8', timeout: 100_000 });

test('embed fills a marked table, --check passes, then fails on a doctored number', { timeout: 120_000 }, () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'headroom-embed-'));
  try {
    const doc = path.join(dir, 'doc.md');
    writeFileSync(doc, 'Intro.\n\n<!-- embed-table: results/ladder/mock-smoke#ladder -->\nstale\n<!-- /embed-table -->\n\nOutro.\n');
    assert.equal(embed('--check', doc).status, 1, 'a stale block fails --check');
    const w = embed(doc);
    assert.equal(w.status, 0, w.stderr);
    const text = readFileSync(doc, 'utf8');
    assert.equal(text, `Intro.\n\n<!-- embed-table: results/ladder/mock-smoke#ladder -->\n${readFileSync('results/ladder/mock-smoke/report/tables/ladder.md', 'utf8')}<!-- /embed-table -->\n\nOutro.\n`);
    const ok = embed('--check', doc);
    assert.equal(ok.status, 0, ok.stderr);

    // Doctor one number in the table's first data row (the peak goodput cell).
    const doctored = text.replace(/(\| 1 FIFO[^|]*\|[^|]*\| )(\d+)\.(\d\d)/, (_m, pre: string, a: string, b: string) => `${pre}${Number(a) + 1}.${b}`);
    assert.notEqual(doctored, text, 'the doctoring changed a number');
    writeFileSync(doc, doctored);
    const bad = embed('--check', doc);
    assert.equal(bad.status, 1, bad.stderr);
    assert.match(bad.stderr, /the table results\/ladder\/mock-smoke#ladder no longer matches its data/);
    assert.equal(readFileSync(doc, 'utf8'), doctored, '--check never writes');

    writeFileSync(doc, '<!-- embed-table: results/ladder/mock-smoke#no-such-table -->\n<!-- /embed-table -->\n');
    const unknown = embed('--check', doc);
    assert.equal(unknown.status, 2);
    assert.match(unknown.stderr, /has no table 'no-such-table'/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
