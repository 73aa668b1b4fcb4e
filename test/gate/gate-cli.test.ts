// The gate end to end, through the real CLI against the committed baseline: exactly 1 against a
// deliberately broken scheduler (one sequence slot: max batch 1), exactly 2 against a dead server
// (nothing listening, and a server killed mid-run). The runs are shortened with --duration-s; the
// rates, SLO, thresholds and rules are the baseline's, so the verdict logic is the gate's own.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runCli } from '../cli/run-cli.ts';
import { spawnServe } from '../helpers/serve-process.ts';

/** Long enough that the lower baseline rate still has ≥ 100 steady arrivals (MIN_ARRIVALS). */
const SHORT_S = '45';
/**
 * The generator's slip bound for the red test: the suite shares the machine with other test files
 * (and the gate's server), and a generator that fell 49 ms behind once made the broken-scheduler
 * run "invalid" (exit 2) instead of a regression. What this test checks is the regression verdict;
 * the slip rule has its own tests (judge.test.ts).
 */
const LOADED_SLIP_MS = '250';

function tmp(): string {
  return mkdtempSync(path.join(os.tmpdir(), 'headroom-gate-'));
}

/** A port that was free a moment ago and that nothing listens on now. */
async function deadPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as { port: number }).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

test('exit 1 against a broken scheduler (max batch 1: --parallel 1), confirmed by a second run', { timeout: 560_000 }, async (t) => {
  const out = tmp();
  try {
    const r = await runCli(['gate', '--parallel', '1', '--duration-s', SHORT_S, '--max-slip-p99-ms', LOADED_SLIP_MS, '--out', out], {}, 540_000);
    t.diagnostic(r.stdout);
    assert.equal(r.code, 1, `expected exit 1 (regression); stdout: ${r.stdout}\nstderr: ${r.stderr}`);
    assert.match(r.stdout, /verdict: REGRESSION \(exit 1\)/);
    const g = JSON.parse(readFileSync(path.join(out, 'gate.json'), 'utf8')) as { verdict: { kind: string; rows: { kind: string }[] } };
    assert.equal(g.verdict.kind, 'regression');
    // Measured, not invalid: every rate was a valid run.
    assert.ok(g.verdict.rows.every((row) => row.kind !== 'invalid'), JSON.stringify(g.verdict.rows));
    // The regression was measured twice: the confirmation regressed too.
    assert.match(r.stderr, /measuring (it|them) once more to confirm/);
    assert.match(r.stdout, /confirmation \(regressed too\)/);
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});

test('exit 2 against a dead server (nothing listens at --url)', { timeout: 120_000 }, async () => {
  const out = tmp();
  try {
    const port = await deadPort();
    const r = await runCli(['gate', '--url', `http://127.0.0.1:${port}`, '--duration-s', SHORT_S, '--out', out], {}, 100_000);
    assert.equal(r.code, 2, `expected exit 2 (invalid run); stdout: ${r.stdout}\nstderr: ${r.stderr}`);
    assert.match(r.stdout, /verdict: INVALID \(exit 2\)/);
    assert.match(r.stdout, /cannot reach/);
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});

test('exit 2 against a server killed mid-run', { timeout: 200_000 }, async () => {
  const out = tmp();
  const s = spawnServe(['--runner', 'mock', '--host', '127.0.0.1', '--port', '0', '--admission', 'off']);
  try {
    const url = (await s.waitFor(/serving .* on (http:\/\/[\d.:]+)/))[1]!;
    const gate = runCli(['gate', '--url', url, '--duration-s', '20', '--out', out], {}, 180_000);
    // Killed once the run is under way (its first rate's records are being written by then).
    setTimeout(() => s.proc.kill('SIGKILL'), 8_000);
    const r = await gate;
    assert.equal(r.code, 2, `expected exit 2 (invalid run); stdout: ${r.stdout}\nstderr: ${r.stderr}`);
    assert.match(r.stdout, /transport errors|cannot reach/);
  } finally {
    s.proc.kill('SIGKILL');
    rmSync(out, { recursive: true, force: true });
  }
});
