// The flight recorder on a disk that fills: a real 1 MiB tmpfs under `serve --record`. A write
// error (here ENOSPC) stops recording with one log line, is counted on /metrics and shown on
// /stats, and the server goes on answering every request. Needs `mount` (root, as here and in
// CI); skipped, saying why, where mounting is not permitted.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { spawnServe } from '../helpers/serve-process.ts';
import { complete, pool, sample, scrape } from './util.ts';

test('a full recording disk stops the recording, not the server', { timeout: 120_000 }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'headroom-rec-full-'));
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', dir], { stdio: 'pipe' });
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    t.skip(`cannot mount a tmpfs here (${(err as Error).message.split('\n')[0]})`);
    return;
  }
  let s: ReturnType<typeof spawnServe> | null = null;
  t.after(async () => {
    if (s !== null && s.proc.exitCode === null) {
      s.proc.kill('SIGKILL');
      await s.exited;
    }
    execFileSync('umount', [dir], { stdio: 'pipe' });
    rmSync(dir, { recursive: true, force: true });
  });
  // 8 segments of 200,000 bytes would need 1.6 MB: the disk fills first.
  s = spawnServe(['--runner', 'mock', '--host', '127.0.0.1', '--port', '0', '--admission', 'off', '--mock-speed', '0', '--record', dir, '--record-max-bytes', '200000']);
  const url = (await s.waitFor(/serving .* on (http:\/\/[\d.:]+); ready/))[1]!;

  // Two at a time, 64 tokens each: some 5 KB of step records per request, so a few hundred fill
  // 1 MiB. Send rounds until
  // the recorder reports the failure (it writes once a second), every one answered.
  let numSent = 0;
  let errors: number | null = 0;
  for (let round = 0; round < 20 && (errors ?? 0) === 0; round++) {
    const results = await pool(100, 2, (i) => complete(url, { prompt: `request ${numSent + i}`, max_tokens: 64, ignore_eos: true }));
    numSent += results.length;
    assert.deepEqual([...new Set(results.map((r) => r.status))], [200], `round ${round}: every request answered`);
    await new Promise((r) => setTimeout(r, 1200));
    errors = sample(await scrape(url), 'headroom_recorder_write_errors_total');
  }
  assert.equal(errors, 1, `the write error is counted once (after ${numSent} requests)`);
  assert.equal(s.proc.exitCode, null, `still running; output: ${s.output().slice(-2000)}`);

  // Still serving after the failure, and later flushes do not log or count again.
  const after = await pool(50, 8, (i) => complete(url, { prompt: `after ${i}`, max_tokens: 8 }));
  assert.deepEqual([...new Set(after.map((r) => r.status))], [200]);
  await new Promise((r) => setTimeout(r, 1200));
  assert.equal((await fetch(`${url}/health`)).status, 200);
  assert.equal(sample(await scrape(url), 'headroom_recorder_write_errors_total'), 1);
  const stats = (await (await fetch(`${url}/stats`)).json()) as { recorder: { recording: boolean; writeError: string | null } };
  assert.equal(stats.recorder.recording, false);
  assert.match(stats.recorder.writeError ?? '', /ENOSPC/);
  const lines = s.output().split('\n').filter((l) => /ENOSPC/.test(l));
  assert.equal(lines.length, 1, `one line about the failure: ${lines.join('\n')}`);
  assert.match(lines[0]!, /recording stopped/);
  assert.equal(s.proc.exitCode, null);
});
