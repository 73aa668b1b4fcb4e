// The controller factory's start-up checks: an artifact fitted on another runner, model or machine
// is refused (or, with allowMismatch, used with a loud warning); collected traces warm-start the
// calibration so the bound is calibrated from the first request.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { createAdmissionController } from '../../src/admission/factory.ts';
import { loadDataset } from '../../src/admission/dataset.ts';

const ARTIFACT = 'results/admission/mock/e2e-gbdt.json';
const TRACES = 'results/admission/mock/collect/round-2';

test('an artifact fitted elsewhere is refused at start-up, or used with a warning when allowed', () => {
  const elsewhere = { runner: 'llama', modelSha256: 'abc', machine: 'another machine' };
  assert.throws(() => createAdmissionController({ mode: 'conformal', artifactPath: ARTIFACT, expect: elsewhere }), /fitted elsewhere: runner .*modelSha256 .*machine/);
  const warnings: string[] = [];
  const c = createAdmissionController({ mode: 'conformal', artifactPath: ARTIFACT, expect: elsewhere, allowMismatch: true, warn: (m) => warnings.push(m) });
  assert.equal(c.name, 'conformal');
  assert.equal(warnings.length, 1);
  assert.match(warnings[0]!, /WARNING: .*its bound may be arbitrary here/);
});

test('the artifact it was fitted for loads silently; traces warm-start the calibration', () => {
  const artifact = JSON.parse(readFileSync(ARTIFACT, 'utf8')) as { provenance: { machine: string } };
  const here = { runner: 'mock', modelSha256: 'mock', machine: artifact.provenance.machine };
  const cold = createAdmissionController({ mode: 'conformal', artifactPath: ARTIFACT, expect: here });
  const warm = createAdmissionController({ mode: 'conformal', artifactPath: ARTIFACT, expect: here, calibrationTraces: TRACES });
  const e2e = (c: typeof cold) => (c.state() as { e2e: { calibration: { status: string; n: number } } }).e2e.calibration;
  assert.equal(e2e(cold).status, 'uncalibrated');
  assert.equal(e2e(warm).status, 'calibrated');
  assert.ok(e2e(warm).n >= 100, `warm start from ${e2e(warm).n} outcomes`);
});

test('a warm start from fewer held-out outcomes than the small-n guard is calibrated from the first request; too few for the guarantee is refused', () => {
  const artifact = JSON.parse(readFileSync(ARTIFACT, 'utf8')) as { provenance: { machine: string } };
  const here = { runner: 'mock', modelSha256: 'mock', machine: artifact.provenance.machine };
  const lines = readFileSync(join(TRACES, 'rate-1', 'trace.jsonl'), 'utf8').split('\n').filter((l) => l.trim() !== '');
  const dir = mkdtempSync(join(tmpdir(), 'headroom-warm-'));
  try {
    // The first k trace lines as a collection of their own; how many outcomes they give as the factory reads them.
    const traces = (k: number): { dir: string; rows: number } => {
      const d = join(dir, `first-${k}`, 'rate-1');
      mkdirSync(d, { recursive: true });
      writeFileSync(join(d, 'trace.jsonl'), lines.slice(0, k).join('\n') + '\n');
      return { dir: join(dir, `first-${k}`), rows: loadDataset(join(dir, `first-${k}`), 'e2e').numRows };
    };
    const e2e = (c: ReturnType<typeof createAdmissionController>) => (c.state() as { e2e: { calibration: { status: string; n: number; q: number | null } } }).e2e.calibration;
    const some = traces(45);
    assert.ok(some.rows >= 19 && some.rows < 100, `${some.rows} outcomes: between what a 95% guarantee needs and the guard`);
    const warm = e2e(createAdmissionController({ mode: 'conformal', artifactPath: ARTIFACT, expect: here, calibrationTraces: some.dir }));
    assert.equal(warm.status, 'calibrated');
    assert.equal(warm.n, some.rows);
    assert.ok(warm.q !== null && Number.isFinite(warm.q));
    // At 99% the same rows certify nothing (the rank passes n below 99 rows): refused at start-up.
    assert.throws(
      () => createAdmissionController({ mode: 'conformal', guarantee: 0.99, artifactPath: ARTIFACT, expect: here, calibrationTraces: some.dir }),
      new RegExp(`hold ${some.rows} admitted outcomes, too few to certify a 0.99 guarantee \\(it needs at least 99\\)`),
    );
    const few = traces(12);
    assert.ok(few.rows > 0 && few.rows < 19, `${few.rows} outcomes`);
    assert.throws(() => createAdmissionController({ mode: 'conformal', artifactPath: ARTIFACT, expect: here, calibrationTraces: few.dir }), /too few to certify a 0.95 guarantee \(it needs at least 19\)/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('the default controller has the shortcut on, reading the queue; each can be switched off', () => {
  const state = (c: ReturnType<typeof createAdmissionController>) => (c.state?.() ?? {}) as { headroom: { allowQueue: boolean } | null };
  assert.equal(state(createAdmissionController({ mode: 'conformal' })).headroom?.allowQueue, true);
  assert.equal(state(createAdmissionController({ mode: 'conformal', headroomQueue: false })).headroom?.allowQueue, false);
  assert.equal(state(createAdmissionController({ mode: 'conformal', headroom: false })).headroom, null);
});

test('a warm start calibrates on censored rows too, at the time they were cut: requests clients gave up on are misses, not missing', () => {
  const artifact = JSON.parse(readFileSync(ARTIFACT, 'utf8')) as { provenance: { machine: string } };
  const here = { runner: 'mock', modelSha256: 'mock', machine: artifact.provenance.machine };
  const rows = readFileSync(join(TRACES, 'rate-1', 'trace.jsonl'), 'utf8').split('\n').filter((l) => l.trim() !== '').map((l) => JSON.parse(l) as { admitted: boolean; censored: boolean; outcome: string; e2e_ms: number | null });
  const dir = mkdtempSync(join(tmpdir(), 'headroom-censored-'));
  try {
    // Every fifth admitted row was cut by a client timeout at ten times its latency (the slowest are the ones given up on).
    let k = 0;
    const cut = rows.map((r) => (r.admitted && r.e2e_ms !== null && k++ % 5 === 0 ? { ...r, censored: true, outcome: 'abort', e2e_ms: r.e2e_ms * 10 } : r));
    const write = (name: string, rs: readonly object[]): string => {
      mkdirSync(join(dir, name, 'rate-1'), { recursive: true });
      writeFileSync(join(dir, name, 'rate-1', 'trace.jsonl'), rs.map((r) => JSON.stringify(r)).join('\n') + '\n');
      return join(dir, name);
    };
    const withCut = write('with-cut', cut);
    const withoutCut = write('without-cut', cut.filter((r) => !r.censored));
    const calibration = (traces: string) => (createAdmissionController({ mode: 'conformal', artifactPath: ARTIFACT, expect: here, calibrationTraces: traces }).state() as { e2e: { calibration: { n: number; q: number } } }).e2e.calibration;
    const kept = calibration(withCut);
    const dropped = calibration(withoutCut);
    assert.equal(kept.n, loadDataset(withCut, 'e2e', 'keep').numRows);
    assert.equal(kept.n - dropped.n, k === 0 ? 0 : Math.ceil(k / 5), 'the cut rows are calibration outcomes');
    assert.ok(kept.q > dropped.q, `the bound's quantile grows with the cut rows (${kept.q} vs ${dropped.q})`);
    // Fitting still leaves them out: a time a request was cut at is not its latency.
    assert.equal(loadDataset(withCut, 'e2e').numRows, dropped.n);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
