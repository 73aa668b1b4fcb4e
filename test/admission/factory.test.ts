// The controller factory's start-up checks: an artifact fitted on another runner, model or machine
// is refused (or, with allowMismatch, used with a loud warning); collected traces warm-start the
// calibration so the bound is calibrated from the first request.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { createAdmissionController } from '../../src/admission/factory.ts';

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

test('the default controller has the shortcut on, reading the queue; each can be switched off', () => {
  const state = (c: ReturnType<typeof createAdmissionController>) => (c.state?.() ?? {}) as { headroom: { allowQueue: boolean } | null };
  assert.equal(state(createAdmissionController({ mode: 'conformal' })).headroom?.allowQueue, true);
  assert.equal(state(createAdmissionController({ mode: 'conformal', headroomQueue: false })).headroom?.allowQueue, false);
  assert.equal(state(createAdmissionController({ mode: 'conformal', headroom: false })).headroom, null);
});
