// `headroom admission train` and `evaluate` take the GBDT's size from flags: the artifact records
// and holds exactly the trees asked for (fewer trees are a cheaper decision: docs/admission.md).
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { runCli } from './run-cli.ts';

const TRACES = 'results/admission/llama-tiny-1t-native/collect';
const dir = mkdtempSync(path.join(os.tmpdir(), 'headroom-train-'));
after(() => rmSync(dir, { recursive: true, force: true }));

test('admission train --gbdt-rounds/--gbdt-learning-rate/--gbdt-depth size the model', async () => {
  const out = path.join(dir, 'small.json');
  const r = await runCli(['admission', 'train', '--traces', TRACES, '--rounds', '0', '--runner', 'mock', '--gbdt-rounds', '7', '--gbdt-learning-rate', '0.3', '--gbdt-depth', '2', '--out', out]);
  assert.equal(r.code, 0, r.stderr);
  const a = JSON.parse(readFileSync(out, 'utf8')) as { model: { roots: number[]; feature: number[] }; training: { options: Record<string, unknown> } };
  assert.equal(a.model.roots.length, 7);
  assert.ok(a.model.feature.length <= 7 * 7, `depth 2 trees hold at most 7 nodes each, got ${a.model.feature.length} nodes`);
  assert.deepEqual([a.training.options.numRounds, a.training.options.learningRate, a.training.options.maxDepth], [7, 0.3, 2]);
});

test('admission evaluate --gbdt-rounds reaches the GBDT it fits', async () => {
  const args = ['admission', 'evaluate', '--traces', TRACES, '--train', '0', '--calibrate', '1', '--test', '2', '--alphas', '0.2'];
  const one = await runCli([...args, '--gbdt-rounds', '1', '--gbdt-learning-rate', '0.01']);
  const many = await runCli(args);
  assert.equal(one.code, 0, one.stderr);
  const gbdtRow = (s: string): string => s.split('\n').find((l) => l.startsWith('| gbdt | ratio'))!;
  // One tree at a tiny learning rate is nearly the constant: its bound differs from 200 trees'.
  assert.notEqual(gbdtRow(one.stdout), gbdtRow(many.stdout));
});
