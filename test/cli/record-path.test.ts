// `serve --record` on a path that cannot hold a recording stops at startup, before the port is
// bound, with one line naming the flag: a special filesystem (/proc, /sys), where Node's
// recursive mkdir never returns on some paths (a hang at full CPU), and a directory that cannot
// be created.
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { spawnServe } from '../helpers/serve-process.ts';

/** Only catches a hang: a start-up refusal takes about a second of process start. */
const HANG_MS = 20_000;

async function refused(dir: string): Promise<string> {
  const s = spawnServe(['--runner', 'mock', '--host', '127.0.0.1', '--port', '0', '--record', dir]);
  const timer = setTimeout(() => s.proc.kill('SIGKILL'), HANG_MS);
  const { code, signal } = await s.exited;
  clearTimeout(timer);
  assert.equal(signal, null, `killed after ${HANG_MS} ms: serve --record ${dir} hung; output: ${s.output()}`);
  assert.equal(code, 1, s.output());
  assert.doesNotMatch(s.output(), /listening at/);
  const lines = s.stderr().trim().split('\n');
  assert.equal(lines.length, 1, s.stderr());
  assert.match(lines[0]!, /--record/);
  return lines[0]!;
}

test('serve --record on /proc or /sys is refused at once, naming the flag', { timeout: 3 * HANG_MS }, async (t) => {
  if (!existsSync('/proc/self')) {
    t.skip('no /proc here');
    return;
  }
  assert.match(await refused('/proc/self/rec'), /--record: cannot record to \/proc\/self\/rec: .*special filesystem \(proc\)/);
  if (existsSync('/sys/kernel')) assert.match(await refused('/sys/kernel/rec'), /--record: cannot record to \/sys\/kernel\/rec: .*special filesystem \(sysfs\)/);
});

test('serve --record under a file is refused naming the flag', { timeout: 2 * HANG_MS }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'headroom-rec-path-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, 'a-file'), '');
  assert.match(await refused(join(dir, 'a-file', 'rec')), /--record: cannot record to .*a-file\/rec: .*not a directory/);
});
