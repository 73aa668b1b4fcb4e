// A malformed recording (a field of the wrong type, a negative or absurd count) is refused where it
// is read, with the file, the line and the field named — by the reader, `headroom replay` and the
// dashboard alike — never a JavaScript error from deep inside replay ("s.x.filter is not a
// function", "Invalid array length").
import assert from 'node:assert/strict';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { before, after, test } from 'node:test';
import { startTestServer } from '../helpers/headroom.ts';
import { spawnHeadroom } from '../helpers/serve-process.ts';
import { readRecording } from '../../src/obs/recorder/reader.ts';

const RAW_JS_ERROR = /is not a function|is not iterable|Invalid array length|Cannot read propert|undefined|NaN/;

let root: string;
let good: string;

before(async () => {
  root = mkdtempSync(join(tmpdir(), 'headroom-rec-bad-'));
  mkdirSync(join(root, 'rec'));
  const s = await startTestServer({ mock: { cost: { speed: 1, stepOverheadMs: 2, decodeSeqMs: 0.2 } }, scheduler: { scheduler: 'continuous' }, record: { dir: join(root, 'rec'), flushMs: 50 } });
  await Promise.all(
    Array.from({ length: 4 }, (_, i) =>
      fetch(`${s.url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'headroom-mock', prompt: `question ${i} `.repeat(8), max_tokens: 5, ignore_eos: true }) }).then((r) => r.arrayBuffer()),
    ),
  );
  good = s.headroom.recorder!.runDir;
  await s.close();
});
after(() => rmSync(root, { recursive: true, force: true }));

/** A copy of the good run with the first line of type `t` changed by `edit`; its folder and the changed line's number. */
function corrupt(name: string, t: string, edit: (line: Record<string, unknown>) => void): { dir: string; lineNo: number } {
  const dir = join(root, 'bad', name);
  mkdirSync(join(root, 'bad'), { recursive: true });
  cpSync(good, dir, { recursive: true });
  const file = join(dir, 'segment-000001.jsonl');
  const lines = readFileSync(file, 'utf8').split('\n');
  const i = lines.findIndex((l) => l !== '' && (JSON.parse(l) as { t: string }).t === t);
  assert.ok(i >= 0, `the run has a '${t}' line`);
  const line = JSON.parse(lines[i]!) as Record<string, unknown>;
  edit(line);
  lines[i] = JSON.stringify(line);
  writeFileSync(file, lines.join('\n'));
  return { dir, lineNo: i + 1 };
}

const CASES: [string, string, (l: Record<string, unknown>) => void, RegExp][] = [
  ['step-x-string', 'step', (l) => (l['x'] = 'oops'), /'x'/],
  ['submit-p-negative', 'submit', (l) => (l['p'] = -1), /'p'/],
  ['submit-p-huge', 'submit', (l) => (l['p'] = 1e12), /'p'/],
  ['submit-b-number', 'submit', (l) => (l['b'] = 7), /'b'/],
  ['step-rows', 'step', (l) => (l['r'] = [[1, 2]]), /'r'/],
  ['step-outputs', 'step', (l) => (l['o'] = [['id', -3, null]]), /'o'/],
  ['done-fin', 'done', (l) => (l['fin'] = 'soon'), /'fin'/],
  ['decision-admit', 'decision', (l) => (l['admit'] = 2), /'admit'/],
  ['header-meta', 'header', (l) => (l['meta'] = null), /'meta'/],
  ['no-type', 'step', (l) => delete l['t'], /record type/],
  ['array-line', 'step', (l) => Object.assign(l, { t: 'step', i: 'x' }), /'i'/],
];

test('the reader names the file, line and field of a malformed record', async () => {
  await assert.doesNotReject(readRecording(good));
  for (const [name, t, edit, field] of CASES) {
    const { dir, lineNo } = corrupt(name, t, edit);
    await assert.rejects(readRecording(dir), (e: Error) => {
      assert.match(e.message, new RegExp(`segment-000001\\.jsonl:${lineNo}: `), name);
      assert.match(e.message, field, name);
      assert.doesNotMatch(e.message, /is not a function|Invalid array length|Cannot read propert/, name);
      return true;
    });
  }
  // A line that is JSON but not an object.
  const { dir } = corrupt('not-object', 'step', () => undefined);
  const file = join(dir, 'segment-000001.jsonl');
  writeFileSync(file, readFileSync(file, 'utf8').replace(/\n/, '\n[1,2]\n'));
  await assert.rejects(readRecording(dir), /segment-000001\.jsonl:2: not a record/);
});

test('headroom replay refuses a malformed recording with one line naming the file and line (exit 2)', { timeout: 60_000 }, async () => {
  for (const [name, t, edit] of CASES.slice(0, 3)) {
    const { dir, lineNo } = corrupt(`replay-${name}`, t, edit);
    const p = spawnHeadroom(['replay', dir]);
    const { code } = await p.exited;
    assert.equal(code, 2, p.output());
    const lines = p.stderr().trim().split('\n');
    assert.equal(lines.length, 1, p.stderr());
    assert.match(lines[0]!, new RegExp(`segment-000001\\.jsonl:${lineNo}: `));
    assert.doesNotMatch(lines[0]!, /is not a function|Invalid array length|Cannot read propert/);
  }
});

test('the dashboard answers a malformed run with a 400 naming the line, not a JavaScript error', async (t) => {
  const s = await startTestServer({ dashboardRuns: [join(root, 'bad')] });
  t.after(() => s.close());
  for (const [name, t2, edit] of CASES.slice(0, 4)) {
    const { dir, lineNo } = corrupt(`dash-${name}`, t2, edit);
    const res = await fetch(`${s.url}/dashboard/data?run=${basename(dir)}`);
    const body = (await res.json()) as { error: { message: string; code: string } };
    assert.equal(res.status, 400, JSON.stringify(body));
    assert.match(body.error.message, new RegExp(`segment-000001\\.jsonl:${lineNo}: `));
    assert.doesNotMatch(body.error.message, RAW_JS_ERROR);
  }
});
