// `headroom ladder` end to end on the mock runner, through the real CLI: a tiny study (2 rungs,
// 2 rates, 1 seed, 3 s per run) is killed (SIGKILL, server included) as soon as its first run is
// complete, then rerun with the same flags: the rerun starts servers only for the runs that were
// missing (the half-written one included), the index has every run with its probe, the rung order
// rotates between rates, the arrivals were on disk before the first run, and a resume with other
// settings is refused. A rung-5 run writes its admission trace and the report reads coverage from it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { cliEnv, runCli } from '../cli/run-cli.ts';

const ARGS = ['--runner', 'mock', '--rungs', '3-continuous,4-paged-prefix', '--rates', '2,4', '--seeds', '5', '--duration-s', '3', '--warmup-s', '1', '--slo-ms', '2000', '--timeout-s', '8', '--no-progress'];

interface Row { run_id: string; rung: string; rate: number; rep: number; position: number; status: string; probe_ms: number | null; num_arrivals: number; git_commit: string | null; loadavg_before: number[]; loadavg_after: number[] }

const serverStarts = (dir: string): string[] =>
  existsSync(path.join(dir, 'events.jsonl'))
    ? readFileSync(path.join(dir, 'events.jsonl'), 'utf8').trim().split('\n').map((l) => (JSON.parse(l) as { event: string; run: string })).filter((e) => e.event === 'server-start').map((e) => e.run)
    : [];

/** Runs the ladder in its own process group and SIGKILLs the group once `runId`'s row.json exists. */
async function runUntilFirstRunDone(out: string, runId: string): Promise<void> {
  const proc = spawn(process.execPath, ['bin/headroom.mjs', 'ladder', '--out', out, ...ARGS], { stdio: 'ignore', env: cliEnv(), detached: true });
  const done = path.join(out, 'runs', runId, 'row.json');
  const exited = new Promise<void>((r) => proc.on('exit', () => r()));
  const t0 = Date.now();
  while (!existsSync(done) && Date.now() - t0 < 60_000) await new Promise((r) => setTimeout(r, 50));
  process.kill(-proc.pid!, 'SIGKILL');
  await exited;
}

test('a tiny mock ladder completes, is resumable after a kill, rotates, and stores the probe', { timeout: 240_000 }, async (t) => {
  const out = mkdtempSync(path.join(os.tmpdir(), 'headroom-ladder-'));
  try {
    await runUntilFirstRunDone(out, 'rate-2/seed-5/3-continuous');
    const startsBefore = serverStarts(out);
    assert.ok(startsBefore.length >= 1, 'the first run started a server');
    const plan = JSON.parse(readFileSync(path.join(out, 'plan.json'), 'utf8')) as { runs: { runId: string }[] };
    assert.equal(plan.runs.length, 6);
    // The arrival realisations were written before the first run started.
    const arrivals = path.join(out, 'arrivals', 'digests.json');
    assert.ok(statSync(arrivals).mtimeMs <= statSync(path.join(out, 'runs', 'rate-2/seed-5/3-continuous', 'schedule.parquet')).mtimeMs);
    assert.deepEqual(Object.keys(JSON.parse(readFileSync(arrivals, 'utf8')) as object), ['rate-2-seed-5', 'rate-4-seed-5']);

    const r = await runCli(['ladder', '--out', out, ...ARGS], {}, 200_000);
    t.diagnostic(r.stderr);
    assert.equal(r.code, 0, r.stderr);
    const startsAfter = serverStarts(out).slice(startsBefore.length);
    // Only the missing runs ran: 5 of 6 (the killed half-run among them), never the finished one.
    assert.deepEqual([...startsAfter].sort(), plan.runs.map((x) => x.runId).filter((id) => id !== 'rate-2/seed-5/3-continuous').sort());
    assert.match(r.stderr, /skipped \(done\) rate-2\/seed-5\/3-continuous/);

    const index = JSON.parse(readFileSync(path.join(out, 'ladder.json'), 'utf8')) as { rows: Row[]; num_planned: number; num_done: number };
    assert.equal(index.num_done, 6);
    assert.deepEqual(index.rows.map((x) => x.run_id), plan.runs.map((x) => x.runId));
    for (const row of index.rows) {
      assert.equal(row.status, 'ok', row.run_id);
      assert.ok(row.probe_ms !== null && row.probe_ms > 0, `probe stored on ${row.run_id}`);
      assert.ok(row.num_arrivals > 0);
      assert.equal(row.loadavg_before.length, 3);
      assert.equal(row.loadavg_after.length, 3);
      assert.ok(existsSync(path.join(out, 'runs', row.run_id, 'records.parquet')));
      assert.ok(existsSync(path.join(out, 'runs', row.run_id, 'probe.json')));
    }
    // Rotation: rate 2 starts with rung 3, rate 4 with rung 4; the anchor's second run closes each block.
    const order = (rate: number): string[] => index.rows.filter((x) => x.rate === rate).map((x) => `${x.rung}#${x.rep}`);
    assert.deepEqual(order(2), ['3-continuous#1', '4-paged-prefix#1', '4-paged-prefix#2']);
    assert.deepEqual(order(4), ['4-paged-prefix#1', '3-continuous#1', '4-paged-prefix#2']);
    const csv = readFileSync(path.join(out, 'ladder.csv'), 'utf8').trim().split('\n');
    assert.equal(csv.length, 7);
    assert.match(csv[0]!, /^run_id,.*probe_ms/);

    // A third run with the same flags does nothing; with other settings it is refused.
    const again = await runCli(['ladder', '--out', out, ...ARGS], {}, 60_000);
    assert.equal(again.code, 0, again.stderr);
    assert.equal(serverStarts(out).length, startsBefore.length + startsAfter.length);
    const other = await runCli(['ladder', '--out', out, ...ARGS.map((a) => (a === '3' ? '4' : a))], {}, 60_000);
    assert.equal(other.code, 1);
    assert.match(other.stderr, /planned with other settings/);
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});

test('bad flags give one clear line', async () => {
  for (const [args, msg] of [
    [['--rates', '0'], /--rates.*expected a positive number, got '0'/],
    [['--rungs', '6-magic'], /--rungs: expected ids from .*got '6-magic'/],
    [['--runner', 'gpu'], /expected llama or mock, got 'gpu'/],
    [['--seeds', '1,1'], /expected distinct seeds/],
    [['--warmup-s', '9', '--duration-s', '5'], /warm-up < duration/],
    [['--workload', 'poetry'], /--workload.*'poetry' is invalid. Allowed choices are chat, /],
    [['--admission-calibration-traces', 'results'], /--admission-calibration-traces: expected --admission-artifact with it/],
  ] as const) {
    const r = await runCli(['ladder', '--out', path.join(os.tmpdir(), 'headroom-ladder-never'), '--runner', 'mock', ...args]);
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, msg);
    assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
  }
});

/** One rung-5 study of a single 3 s run at 6 req/s on the mock; returns the study folder and the run's. */
async function rung5Study(extra: readonly string[]): Promise<{ out: string; run: string }> {
  const out = mkdtempSync(path.join(os.tmpdir(), 'headroom-ladder-r5-'));
  const args = ['--runner', 'mock', '--rungs', '5-admission-95', '--rates', '6', '--seeds', '2', '--duration-s', '3', '--warmup-s', '0.5', '--slo-ms', '2000', '--timeout-s', '8', '--no-progress', ...extra];
  const r = await runCli(['ladder', '--out', out, ...args], {}, 100_000);
  assert.equal(r.code, 0, r.stderr);
  return { out, run: path.join(out, 'runs', 'rate-6/seed-2/5-admission-95') };
}

test('rung 5 runs the shipped admission (no artifact) on a natural-length workload whose EOS it learned from the server, and writes its admission trace', { timeout: 120_000 }, async () => {
  const { out, run } = await rung5Study(['--workload', 'chat-natural']);
  try {
    const plan = JSON.parse(readFileSync(path.join(out, 'plan.json'), 'utf8')) as { config: { workload: string; admissionArtifact: string | null; admissionCalibrationTraces: string | null }; eos: { eosTokenId: number; vocabSize: number } | null };
    assert.deepEqual([plan.config.workload, plan.config.admissionArtifact, plan.config.admissionCalibrationTraces], ['chat-natural', null, null]);
    assert.ok(plan.eos !== null && plan.eos.vocabSize > plan.eos.eosTokenId, JSON.stringify(plan.eos));
    // The run sent the natural-length workload: every request biased toward that EOS, max_tokens only a cap.
    const meta = JSON.parse(readFileSync(path.join(run, 'meta.json'), 'utf8')) as { workload: { kind: string; natural_length: { eosTokenId: number; eos_bias: number } | null } };
    assert.equal(meta.workload.kind, 'chat-natural');
    assert.equal(meta.workload.natural_length?.eosTokenId, plan.eos.eosTokenId, JSON.stringify(meta.workload));
    const row = JSON.parse(readFileSync(path.join(run, 'row.json'), 'utf8')) as { trace_file: string | null; probe_ms: number | null };
    assert.equal(row.trace_file, 'admission-trace.jsonl');
    assert.ok(row.probe_ms !== null, 'the probe passed admission (operator bypass)');
    const trace = readFileSync(path.join(run, row.trace_file), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { bound_ms: number | null });
    assert.ok(trace.length > 5, `trace rows: ${trace.length}`);
    // A cold start: 3 s is too short for the bound to calibrate, so no decision had one.
    assert.ok(trace.every((t) => t.bound_ms === null), 'no calibrated bound in a cold 3 s run');
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});

test('rung 5 with a hand-trained artifact: the report reads coverage from its admission trace', { timeout: 120_000 }, async () => {
  const { out } = await rung5Study(['--admission-artifact', 'results/gate/e2e-gbdt.json', '--admission-calibration-traces', 'results/gate/collect/round-1']);
  try {
    const rep = await runCli(['report', out], {}, 100_000);
    assert.equal(rep.code, 0, rep.stderr);
    const coverage = readFileSync(path.join(out, 'report', 'tables', 'coverage.md'), 'utf8');
    assert.match(coverage, /\| 5 \+ conformal admission \(95%\) \| 95% \| \d+\.\d% \| [1-9]\d* \|/);
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});
