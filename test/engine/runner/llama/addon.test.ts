// The addon's own contract, below the runner: sequence bookkeeping over llama_memory_*, the
// in-flight guard, C++-side timings, and argument validation.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ensureDefaultModel } from '../../../../src/model/default-model.ts';
import { llamaBinsDir, loadLlamaAddon } from '../../../../src/engine/runner/llama/addon.ts';

test('seqCopy / seqRemove / seqPosMax / memoryClear track the cells of each sequence', async () => {
  const addon = loadLlamaAddon();
  const ctx = new addon.HeadroomLlama({
    modelPath: await ensureDefaultModel(),
    binsDir: llamaBinsDir(),
    nCtx: 512,
    nCtxMax: 8192,
    nSeqMax: 4,
    nBatch: 64,
    nUbatch: 64,
    threads: 2,
    threadsBatch: 2,
    verbose: false,
  });
  try {
    const info = ctx.info();
    assert.equal(info.nCtx, 512);
    assert.equal(info.nSeqMax, 4);
    assert.equal(info.threads, 2);
    const toks = ctx.tokenize('one two three four five six seven eight nine', true, false).slice(0, 10);
    const n = toks.length;
    const pending = ctx.decode(toks, Int32Array.from(toks, (_, i) => i), new Int32Array(n), Uint8Array.from(toks, (_, i) => (i === n - 1 ? 1 : 0)));
    // While the worker runs, the context refuses to be touched (steps must not overlap).
    assert.throws(() => ctx.seqPosMax(0), /in flight/);
    const res = await pending;
    assert.equal(res.status, 0);
    assert.equal(res.sampled.length, 1);
    assert.ok(res.decodeUs > 0 && res.workerUs >= res.decodeUs, `timings ${JSON.stringify(res)}`);

    assert.equal(ctx.seqPosMax(0), n - 1);
    assert.equal(ctx.seqPosMax(1), -1);
    ctx.seqCopy(0, 1, 0, 5);
    assert.equal(ctx.seqPosMax(1), 4);
    assert.equal(ctx.seqRemove(0, 5, -1), true);
    assert.equal(ctx.seqPosMax(0), 4);
    ctx.memoryClear();
    assert.equal(ctx.seqPosMax(0), -1);
    assert.equal(ctx.seqPosMax(1), -1);

    assert.throws(() => ctx.seqPosMax(4), /out of range/);
    assert.throws(() => ctx.decode(new Int32Array(65), new Int32Array(65), new Int32Array(65), new Uint8Array(65)), /1\.\.64 rows/);
    assert.throws(() => ctx.decode(Int32Array.of(info.nVocab), Int32Array.of(0), Int32Array.of(0), Uint8Array.of(1)), /token id/);
  } finally {
    ctx.close();
  }
  assert.throws(() => ctx.seqPosMax(0), /closed/);
});
