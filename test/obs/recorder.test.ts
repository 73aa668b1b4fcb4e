// The flight recorder's bounds: segments never exceed their byte cap, rotation keeps at most N
// files (the newest), every kept segment opens with the run header and reads alone, a record that
// could never fit is dropped and counted, and a writer that falls behind drops instead of growing.

import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import type { RequestTimeline } from '../../src/engine/outputs.ts';
import { readRecording } from '../../src/obs/recorder/reader.ts';
import { Recorder, segmentName } from '../../src/obs/recorder/recorder.ts';

const clock = { nowMs: () => 1000 };

function timeline(i: number, id = `cmpl-${i}`): RequestTimeline {
  return { requestId: id, arrivalMs: i, deadlineMs: i + 5000, scheduledMs: i + 1, firstTokenMs: i + 2, finishedMs: i + 10, numPromptTokens: 16, maxTokens: 8, numCachedTokens: 0, numOutputTokens: 8, numPreemptions: 0, outcome: 'length' };
}

function tmp(t: { after(fn: () => void): void }): string {
  const dir = mkdtempSync(join(tmpdir(), 'headroom-rec-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

test('rotation: each segment stays under its byte cap, only the newest N are kept, each opens with the header', async (t) => {
  const dir = tmp(t);
  const maxSegmentBytes = 4096;
  const r = await Recorder.start({ dir, runName: 'rot', clock, version: 'test', meta: { model: 'm' }, maxSegmentBytes, maxSegments: 3, flushMs: 60_000 });
  const n = 400;
  // Several flushes, as the timer would do them.
  for (let i = 0; i < n; i++) {
    r.finished(timeline(i), 'length');
    if (i % 97 === 0) await r.flush();
  }
  await r.close();
  const files = readdirSync(r.runDir).sort();
  assert.equal(files.length, 3, `kept: ${files.join(', ')}`);
  const numbers = files.map((f) => Number(/(\d+)/.exec(f)![1]));
  assert.ok(numbers[0]! > 1, 'the oldest segments were deleted');
  assert.deepEqual(numbers, [numbers[0]!, numbers[0]! + 1, numbers[0]! + 2], 'the newest three, consecutive');
  for (const f of files) {
    const p = join(r.runDir, f);
    assert.ok(statSync(p).size <= maxSegmentBytes, `${f} is ${statSync(p).size} bytes > ${maxSegmentBytes}`);
    const first = JSON.parse(readFileSync(p, 'utf8').split('\n')[0]!) as { t: string; segment: number; run: string };
    assert.equal(first.t, 'header');
    assert.equal(first.run, 'rot');
    assert.equal(`${segmentName(first.segment)}`, f);
  }
  const rec = await readRecording(r.runDir);
  // What was kept is the newest records, without a gap, ending with the last one and the end record.
  const ids = rec.done.map((d) => Number(d.id.slice(5)));
  assert.equal(ids[ids.length - 1], n - 1);
  ids.forEach((id, k) => assert.equal(id, ids[0]! + k));
  assert.ok(ids[0]! > 0);
  assert.equal(r.numWritten, n + 1);
  assert.equal(rec.end?.dropped, 0);
  assert.equal(rec.numTruncated, 0);
});

test('a record larger than a segment is dropped and counted; the rest are written', async (t) => {
  const dir = tmp(t);
  const r = await Recorder.start({ dir, runName: 'big', clock, version: 'test', meta: {}, maxSegmentBytes: 4096, maxSegments: 2, flushMs: 60_000 });
  r.finished(timeline(1), 'stop');
  r.finished(timeline(2, `cmpl-${'x'.repeat(5000)}`), 'stop');
  r.finished(timeline(3), 'stop');
  await r.close();
  assert.equal(r.numDropped, 1);
  const rec = await readRecording(r.runDir);
  assert.deepEqual(rec.done.map((d) => d.id), ['cmpl-1', 'cmpl-3']);
  assert.equal(rec.end?.dropped, 1);
});

test('a writer that falls behind drops records past maxPendingRecords instead of growing', async (t) => {
  const dir = tmp(t);
  const r = await Recorder.start({ dir, runName: 'lag', clock, version: 'test', meta: {}, maxPendingRecords: 10, flushMs: 60_000 });
  for (let i = 0; i < 25; i++) r.refused(timeline(i), 'conformal', i);
  assert.equal(r.numDropped, 15);
  await r.close();
  const rec = await readRecording(r.runDir);
  assert.equal(rec.refused.length, 10);
  assert.equal(rec.refused[0]!.why, 'conformal');
  assert.equal(rec.end?.dropped, 15);
});

test('the flush timer writes without being asked; events after close are ignored', async (t) => {
  const dir = tmp(t);
  const r = await Recorder.start({ dir, runName: 'timer', clock, version: 'test', meta: {}, flushMs: 20 });
  r.finished(timeline(7), 'stop');
  await new Promise((res) => setTimeout(res, 150));
  assert.equal((await readRecording(r.runDir)).done.length, 1, 'flushed by the timer');
  await r.close();
  r.finished(timeline(8), 'stop');
  await r.flush();
  assert.equal((await readRecording(r.runDir)).done.length, 1);
});

test('bad limits and run names are refused with what was expected', async (t) => {
  const dir = tmp(t);
  await assert.rejects(Recorder.start({ dir, clock, version: 't', meta: {}, maxSegmentBytes: 100 }), /maxSegmentBytes to be an integer ≥ 4096, got 100/);
  await assert.rejects(Recorder.start({ dir, clock, version: 't', meta: {}, maxSegments: 0 }), /maxSegments to be an integer ≥ 1, got 0/);
  await assert.rejects(Recorder.start({ dir, runName: '../up', clock, version: 't', meta: {} }), /run name/);
  // Two recorders asking for one name get two folders.
  const a = await Recorder.start({ dir, runName: 'same', clock, version: 't', meta: {} });
  const b = await Recorder.start({ dir, runName: 'same', clock, version: 't', meta: {} });
  assert.notEqual(a.runDir, b.runDir);
  await a.close();
  await b.close();
});

test('the reader skips a cut-short last line and names any other bad line', async (t) => {
  const dir = tmp(t);
  const r = await Recorder.start({ dir, runName: 'cut', clock, version: 't', meta: {}, flushMs: 60_000 });
  r.finished(timeline(1), 'stop');
  await r.close();
  const { appendFileSync, writeFileSync } = await import('node:fs');
  const p = join(r.runDir, segmentName(1));
  appendFileSync(p, '{"t":"done","id":"cmpl-');
  const rec = await readRecording(r.runDir);
  assert.equal(rec.numTruncated, 1);
  assert.equal(rec.done.length, 1);
  writeFileSync(p, `${readFileSync(p, 'utf8').split('\n')[0]}\nnot json\n{"t":"end","at":1,"dropped":0}\n`);
  await assert.rejects(readRecording(r.runDir), /segment-000001\.jsonl:2: not a JSON record/);
});
