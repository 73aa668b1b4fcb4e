// `headroom replay` against a live recording: a mock-runner server with --record serves a load with
// a shared prompt prefix (prefix-cache hits), a queue cap (refusals), parallel sampling (forks) and
// TPOT budgets (chunks sized to them);
// replaying it with the recorded settings reproduces every step's plan and outputs exactly, and a
// changed scheduler setting shows diffs from the step where its decisions part. The CLI's exit
// codes: 0 same, 1 differs, 2 not replayable; a rotated run is refused.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { startTestServer } from '../helpers/headroom.ts';
import { readRecording } from '../../src/obs/recorder/reader.ts';
import type { Recording } from '../../src/obs/recorder/reader.ts';
import { Recorder } from '../../src/obs/recorder/recorder.ts';
import { replay } from '../../src/replay/replay.ts';

const SYSTEM = 'You are a careful assistant who answers in one short line. '.repeat(6);

async function recordLoad(dir: string): Promise<{ rec: Recording; runDir: string; statuses: number[] }> {
  const s = await startTestServer({
    mock: { cost: { speed: 1, stepOverheadMs: 5, decodeSeqMs: 0.5, prefillTokenMs: 0.05 } },
    scheduler: { scheduler: 'continuous', prefillChunkTokens: 64 },
    maxQueuedRequests: 12,
    record: { dir, flushMs: 100 },
  });
  const sends: Promise<number>[] = [];
  for (let i = 0; i < 40; i++) {
    await new Promise((r) => setTimeout(r, i % 10 === 9 ? 40 : 4));
    const body = { model: 'headroom-mock', prompt: `${SYSTEM}question ${i}: ${'why '.repeat(i % 7)}`, max_tokens: 6 + ((i * 5) % 30), ignore_eos: true, ...(i % 8 === 3 ? { n: 2 } : {}) };
    // Some streams carry a TPOT budget, which shrinks the prompt chunks of the steps that carry them.
    const headers = { 'content-type': 'application/json', ...(i % 6 === 1 ? { 'x-slo-tpot-ms': '8' } : {}) };
    sends.push(fetch(`${s.url}/v1/completions`, { method: 'POST', headers, body: JSON.stringify(body) }).then(async (r) => {
      await r.arrayBuffer();
      return r.status;
    }));
  }
  const statuses = await Promise.all(sends);
  const runDir = s.headroom.recorder!.runDir;
  await s.close();
  return { rec: await readRecording(runDir), runDir, statuses };
}

test('a mock-runner recording replays with zero diffs; a changed scheduler setting diffs', { timeout: 120_000 }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'headroom-replay-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const { rec, runDir, statuses } = await recordLoad(dir);
  const served = statuses.filter((x) => x === 200).length;
  assert.ok(served >= 10 && statuses.some((x) => x === 503), `statuses ${statuses.join(',')}`);
  // What the load was meant to exercise is in the recording.
  assert.ok(rec.done.some((d) => d.cached > 0), 'prefix-cache hits');
  assert.ok(rec.submits.some((s) => s.fork !== null), 'parallel sampling');
  assert.ok(rec.steps.some((s) => s.r.length > 1), 'batched steps');
  assert.ok(rec.submits.some((s) => s.tpot === 8), 'TPOT budgets');

  const same = await replay(rec);
  assert.deepEqual(same.diffs, []);
  assert.equal(same.numDiffs, 0);
  assert.equal(same.numReplayedSteps, rec.steps.length);
  assert.equal(same.numRequests, rec.submits.length);

  const changed = await replay(rec, { scheduler: { maxRunning: 2 } });
  assert.ok(changed.numDiffs > 0);
  assert.equal(changed.diffs[0]!.kind, 'plan');
  const chunk = await replay(rec, { scheduler: { prefillChunkTokens: 16 } });
  assert.ok(chunk.numDiffs > 0);

  // The CLI: 0 same, 1 differs, 2 not replayable.
  const cli = (args: string[]) => spawnSync(process.execPath, ['bin/headroom.mjs', 'replay', ...args], { encoding: 'utf8' });
  const ok = cli([runDir]);
  assert.equal(ok.status, 0, ok.stderr);
  assert.match(ok.stdout, /schedule reproduced exactly \(0 diffs\)/);
  const differs = cli([runDir, '--scheduler', 'fifo']);
  assert.equal(differs.status, 1, differs.stderr);
  assert.match(differs.stdout, /steps differ/);
  const notOne = cli([dir]);
  assert.equal(notOne.status, 2);
  assert.match(notOne.stderr, /is not a recording/);
});

test('a run whose first segment was rotated away is refused, saying why', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'headroom-replay-rot-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const r = await Recorder.start({ dir, runName: 'rotated', clock: { nowMs: () => 0 }, version: 't', meta: { scheduler: { scheduler: 'fifo' } }, maxSegmentBytes: 4096, maxSegments: 2, flushMs: 60_000 });
  for (let i = 0; i < 200; i++) r.refused({ requestId: `cmpl-${i}`, arrivalMs: i, deadlineMs: i + 1, scheduledMs: null, firstTokenMs: null, finishedMs: null, numPromptTokens: 1, maxTokens: 1, numCachedTokens: 0, numOutputTokens: 0, numPreemptions: 0, outcome: null }, 'capacity', i);
  await r.close();
  const rec = await readRecording(r.runDir);
  assert.ok(rec.header.segment > 1);
  await assert.rejects(replay(rec), /rotated away; replay needs the run from its first step/);
});
