// --admission-state: what the controller learned survives a restart on the same runner, model,
// machine and configuration (the replayed outcomes rebuild the same calibrated bound); anything
// else starts cold with one line and the old files moved aside; a write error stops saving and
// nothing else.
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import type { AdmissionContext, AdmissionController } from '../../src/admission/controller.ts';
import { createAdmissionController } from '../../src/admission/factory.ts';
import { COMPANION_EVERY } from '../../src/admission/persistent-state.ts';
import { warmFeatures as features } from '../helpers/admission-features.ts';
import type { EngineSnapshot } from '../../src/engine/snapshot.ts';
import { cliEnv } from '../cli/run-cli.ts';
import { spawnServe } from '../helpers/serve-process.ts';

const ctx = (arrivalMs: number): AdmissionContext => ({ requestId: 'r', arrivalMs, sloMs: 4000, numPromptTokens: 200, numCachedTokens: 0, maxTokens: 100, n: 1, numMessages: 1, ttftBudgetMs: null });
const snap = { maxSequences: 16, numRunning: 2, numWaiting: 0, waitingPromptTokens: 0, runningPromptTokens: 0, remainingDecodeTokens: 50, avgStepMs: 10, prefillTokensPerS: 2000, decodeTokensPerS: 200 } as EngineSnapshot;
type Calibration = { status: string; n: number; q: number | null };
const e2e = (c: AdmissionController) => (c.state() as { e2e: { calibration: Calibration } }).e2e.calibration;
const persistence = (c: AdmissionController) => (c.state() as { persistence: { start: string; coldReason: string | null; numReplayed: number; numSaved: number; writeError: string | null } }).persistence;

/** Decide and observe `n` requests whose latency grows with their prompt (a learnable baseline). */
function serve(c: AdmissionController, n: number, from = 0): void {
  for (let i = from; i < from + n; i++) {
    const prompt = 100 + ((i * 37) % 400);
    const x = features({ prompt_tokens: prompt, new_prefill_tokens: prompt, running: i % 4 });
    const d = c.decide(ctx(i * 10), snap, x);
    if (d.admit) c.observe(x, d, { e2eMs: 300 + prompt * 2 + ((i * 7919) % 97), ttftMs: 50 + prompt / 4, censored: i % 50 === 0 });
  }
}

/** Runs `body` with a fresh state directory and console.error captured into `lines`; both undone after. */
function withStateDir(body: (dir: string, lines: string[]) => void): void {
  const dir = mkdtempSync(join(tmpdir(), 'headroom-state-'));
  const lines: string[] = [];
  const errors = console.error;
  console.error = (l: string) => lines.push(l);
  try {
    body(dir, lines);
  } finally {
    console.error = errors;
    rmSync(dir, { recursive: true, force: true });
  }
}

test('a restart with the same state directory starts with the bound it had; another machine starts cold with one line', () => {
  withStateDir((dir, lines) => {
  const where = { dir, runner: 'mock', modelSha256: 'mock', machine: 'this machine' };
  const first = createAdmissionController({ mode: 'conformal', state: where });
  assert.equal(persistence(first).start, 'cold');
  serve(first, 400);
  const learned = e2e(first);
  assert.equal(learned.status, 'calibrated');
  assert.deepEqual(lines, [`headroom: admission state: none saved yet; saving in ${dir}`], 'a first start in an empty directory says where it saves, once');

  const again = createAdmissionController({ mode: 'conformal', state: where });
  assert.equal(persistence(again).start, 'warm');
  assert.ok(persistence(again).numReplayed >= 300, `${persistence(again).numReplayed} outcomes replayed`);
  assert.deepEqual(e2e(again), learned, 'the replay rebuilds the same calibration window');
  const coldStart = (c: AdmissionController) => (c.state() as { e2e: { coldStart: { learned: boolean; n: number; margin: number } } }).e2e.coldStart;
  assert.equal(coldStart(first).learned, true);
  assert.deepEqual(coldStart(again), coldStart(first), 'and the cold-start factor (rows keep the unmargined estimate)');
  assert.match(lines.at(-1)!, /warm start from \d+ saved outcomes/);
  // Both go on alike: the same requests get the same decisions.
  serve(first, 50, 400);
  serve(again, 50, 400);
  assert.deepEqual(e2e(again), e2e(first));

  const elsewhere = createAdmissionController({ mode: 'conformal', state: { ...where, machine: 'another machine' } });
  assert.equal(persistence(elsewhere).start, 'cold');
  assert.equal(e2e(elsewhere).status, 'uncalibrated');
  assert.match(lines.at(-1)!, /cold start \(saved for another machine \(saved "this machine", now "another machine"\)\); earlier files moved aside/);
  assert.ok(existsSync(join(dir, 'outcomes.jsonl.stale')));
  const otherGuarantee = createAdmissionController({ mode: 'conformal', guarantee: 0.99, state: { ...where, machine: 'another machine' } });
  assert.match(persistence(otherGuarantee).coldReason!, /guarantee \(saved 0\.95, now 0\.99\)/);
  });
});

test('a write error stops saving, logs one line, and the controller goes on deciding', () => {
  withStateDir((dir, lines) => {
  const c = createAdmissionController({ mode: 'conformal', state: { dir, runner: 'mock', modelSha256: 'mock', machine: 'm' } });
  serve(c, 10);
  assert.equal(persistence(c).numSaved, 10);
  // The file turns into something that cannot be appended to.
  rmSync(join(dir, 'outcomes.jsonl'));
  mkdirSync(join(dir, 'outcomes.jsonl'));
  serve(c, 200, 10);
  assert.equal(persistence(c).writeError, 'EISDIR');
  assert.equal(persistence(c).numSaved, 10);
  assert.equal(lines.filter((l) => /cannot write/.test(l)).length, 1);
  assert.equal(e2e(c).status, 'calibrated', 'it kept learning');
  assert.equal(readFileSync(join(dir, 'provenance.json'), 'utf8').includes('"runner": "mock"'), true);
  });
});

test('serve --admission-state: a restarted server starts calibrated from what it learned, with the engine\'s estimates', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'headroom-serve-state-'));
  const start = async (): Promise<{ url: string; stop: () => Promise<void>; out: () => string }> => {
    const p = spawnServe(['--runner', 'mock', '--host', '127.0.0.1', '--port', '0', '--admission-state', dir], cliEnv());
    const url = (await p.waitFor(/listening at (http:\/\/127\.0\.0\.1:\d+)/))[1]!;
    await p.waitFor(/ready/);
    return { url, out: () => p.output(), stop: async () => { p.proc.kill('SIGTERM'); await p.exited; } };
  };
  const calibration = async (url: string) => ((await (await fetch(`${url}/stats`)).json()) as { admission: { e2e: { calibration: Calibration }; persistence: { start: string; numReplayed: number } } }).admission;
  try {
    const first = await start();
    for (let i = 0; i < 130; i++) {
      const r = await fetch(`${first.url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'headroom-mock', prompt: `request ${i} of the first run`, max_tokens: 4 + (i % 8) }) });
      assert.equal(r.status, 200);
      await r.text();
    }
    const before = await calibration(first.url);
    assert.equal(before.persistence.start, 'cold');
    assert.equal(before.e2e.calibration.status, 'calibrated');
    await first.stop();
    const second = await start();
    try {
      const after = await calibration(second.url);
      assert.equal(after.persistence.start, 'warm');
      assert.equal(after.persistence.numReplayed, 130);
      assert.equal(after.e2e.calibration.status, 'calibrated', 'calibrated before its first request');
      assert.deepEqual(after.e2e.calibration, before.e2e.calibration);
      assert.match(second.out(), /admission state: warm start from 130 saved outcomes/);
      // The engine's own estimates come back too (saved every COMPANION_EVERY outcomes): the step table before any step but the warm-up's.
      assert.match(second.out(), /admission state: engine restored from .*engine\.json \(\d+ output lengths, step times at [1-9]\d* batch sizes\)/);
      const saved = JSON.parse(readFileSync(join(dir, 'engine.json'), 'utf8')) as { stepTimesByBatch: { mean: (number | null)[] } };
      const stats = (await (await fetch(`${second.url}/stats`)).json()) as { engine: { stepMsByBatch: number[] } };
      const firstMeasured = saved.stepTimesByBatch.mean.findIndex((m) => m !== null);
      assert.equal(stats.engine.stepMsByBatch[firstMeasured], Math.round(saved.stepTimesByBatch.mean[firstMeasured]! * 100) / 100);
    } finally {
      await second.stop();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a kept companion is saved every COMPANION_EVERY outcomes, restored on a warm start, moved aside on a cold one', () => {
  withStateDir((dir, lines) => {
  const where = { dir, runner: 'mock', modelSha256: 'mock', machine: 'm' };
  let counter = 0;
  const first = createAdmissionController({ mode: 'conformal', state: where });
  first.keep!('engine', { save: () => ({ counter }), restore: () => assert.fail('nothing to restore on a first start') });
  assert.throws(() => first.keep!('engine', { save: () => 0, restore: () => '' }), /cannot keep a companion named "engine"/);
  const file = join(dir, 'engine.json');
  for (let i = 0; i < COMPANION_EVERY - 1; i++) {
    counter = i;
    serve(first, 1, i);
  }
  assert.equal(existsSync(file), false, `not before ${COMPANION_EVERY} outcomes`);
  counter = 1234;
  serve(first, 1, COMPANION_EVERY);
  assert.deepEqual(JSON.parse(readFileSync(file, 'utf8')), { counter: 1234 });

  const restored: unknown[] = [];
  const again = createAdmissionController({ mode: 'conformal', state: where });
  again.keep!('engine', { save: () => null, restore: (d) => (restored.push(d), 'one counter') });
  assert.deepEqual(restored, [{ counter: 1234 }]);
  assert.match(lines.at(-1)!, /admission state: engine restored from .*engine\.json \(one counter\)/);

  const refused = createAdmissionController({ mode: 'conformal', state: where });
  refused.keep!('engine', { save: () => null, restore: () => { throw new Error('expected 16 batch sizes'); } });
  assert.match(lines.at(-1)!, /cannot restore engine from .*\(expected 16 batch sizes\); it starts empty/);

  const elsewhere = createAdmissionController({ mode: 'conformal', state: { ...where, machine: 'another' } });
  elsewhere.keep!('engine', { save: () => null, restore: () => assert.fail('a cold start restores nothing') });
  assert.equal(existsSync(file), false);
  assert.ok(existsSync(`${file}.stale`), 'moved aside with the outcomes');
  });
});
