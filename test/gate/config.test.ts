// What the gate's server runs: the admission control a user gets (no artifact, no traces) unless
// a baseline names an artifact, and the workload the baseline was measured on.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DEFAULT_GATE_CONFIG, serveArgs } from '../../src/harness/gate/run.ts';
import { readBaseline } from '../../src/harness/gate/baseline.ts';

test('the default gate serves the shipped admission: conformal, no artifact, no warm-start traces, no state', () => {
  const args = serveArgs(DEFAULT_GATE_CONFIG);
  assert.deepEqual(args.slice(args.indexOf('--admission'), args.indexOf('--admission') + 2), ['--admission', 'conformal']);
  for (const flag of ['--admission-artifact', '--admission-calibration-traces', '--admission-allow-mismatch', '--admission-state']) assert.ok(!args.includes(flag), `${flag} in ${args.join(' ')}`);
  // Port 0: the server keeps no admission state, so every rate starts cold.
  assert.equal(args[args.indexOf('--port') + 1], '0');
});

test('a baseline that names an artifact runs it, with its traces and the mismatch allowance', () => {
  const args = serveArgs({ ...DEFAULT_GATE_CONFIG, admissionArtifact: 'a.json', admissionCalibrationTraces: 'traces' });
  const at = args.indexOf('--admission-artifact');
  assert.deepEqual(args.slice(at, at + 5), ['--admission-artifact', 'a.json', '--admission-calibration-traces', 'traces', '--admission-allow-mismatch']);
  assert.ok(!serveArgs({ ...DEFAULT_GATE_CONFIG, admissionArtifact: 'a.json' }).includes('--admission-calibration-traces'));
});

test('the committed baseline was measured with the default configuration', () => {
  const b = readBaseline('results/gate/baseline.json');
  assert.deepEqual(b.config, DEFAULT_GATE_CONFIG);
});
