// seqStateGet / seqStateSet (llama_state_seq_get_data / set_data): a sequence's cells copied into
// host memory and placed back, as another sequence, later. The ground for a host-memory tier of the
// prefix cache (docs/per-token.md): a restored prompt must continue exactly as the computed one,
// survive a round trip byte for byte, keep cells it shared through seqCopy, and be refused, with
// the cache untouched, when too few cells are free.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ensureDefaultModel } from '../../../../src/model/default-model.ts';
import { llamaBinsDir, loadLlamaAddon } from '../../../../src/engine/runner/llama/addon.ts';
import type { AddonContext } from '../../../../src/engine/runner/llama/addon.ts';

async function open(nCtx: number): Promise<AddonContext> {
  const addon = loadLlamaAddon();
  return new addon.HeadroomLlama({ modelPath: await ensureDefaultModel(), binsDir: llamaBinsDir(), nCtx, nCtxMax: 8192, nSeqMax: 4, nBatch: 512, nUbatch: 512, threads: 1, threadsBatch: 1, verbose: false });
}

/** Appends `tokens` to `seq` from `pos`; the greedy token after the last one. */
async function feed(ctx: AddonContext, seq: number, tokens: readonly number[], pos: number): Promise<number> {
  const n = tokens.length;
  const res = await ctx.decode(Int32Array.from(tokens), Int32Array.from(tokens, (_, i) => pos + i), new Int32Array(n).fill(seq), Uint8Array.from(tokens, (_, i) => (i === n - 1 ? 1 : 0)));
  assert.equal(res.status, 0, `decode status ${res.status}`);
  return res.sampled[0]!;
}

function promptOf(ctx: AddonContext, n: number): number[] {
  const words = 'the gateway admits what fits its budget and refuses the rest with a retry after header at once'.split(' ');
  let text = '';
  let toks: Int32Array = new Int32Array(0);
  for (let i = 0; toks.length < n; i++) {
    text += `${words[i % words.length]} `;
    toks = ctx.tokenize(text, true, false);
  }
  return [...toks.slice(0, n)];
}

test('a sequence restored from host memory continues as the computed one did, and round-trips byte for byte', async () => {
  const ctx = await open(1024);
  try {
    const prompt = promptOf(ctx, 120);
    const steps = 24;
    const first = await feed(ctx, 0, prompt, 0);
    const saved = ctx.seqStateGet(0);
    assert.ok(saved.length > 0);
    // Reference: seq 0 goes on greedily; the teacher-forced tokens below are these.
    const ref = [first];
    for (let i = 0; i < steps - 1; i++) ref.push(await feed(ctx, 0, [ref[i]!], prompt.length + i));
    assert.equal(ctx.seqRemove(0, -1, -1), true);

    assert.equal(ctx.seqStateSet(2, saved), true);
    assert.equal(ctx.seqPosMax(2), prompt.length - 1);
    // The bytes hold each cell's sequence id: the same length under another id.
    assert.equal(ctx.seqStateGet(2).length, saved.length);
    // Teacher forcing: each greedy choice of the restored sequence after the reference's tokens.
    let agree = 0;
    for (let i = 0; i < steps - 1; i++) if ((await feed(ctx, 2, [ref[i]!], prompt.length + i)) === ref[i + 1]) agree++;
    assert.ok(agree >= Math.floor(0.99 * (steps - 1)), `restored continuation agreed on ${agree} of ${steps - 1}`);
    // Put back under its own id, the cells read out exactly as saved.
    assert.equal(ctx.seqRemove(2, -1, -1), true);
    assert.equal(ctx.seqStateSet(0, saved), true);
    assert.deepEqual(ctx.seqStateGet(0), saved);
  } finally {
    ctx.close();
  }
});

test('cells shared through seqCopy are saved and restored as the sequence\'s own', async () => {
  const ctx = await open(1024);
  try {
    const prompt = promptOf(ctx, 80);
    await feed(ctx, 0, prompt, 0);
    ctx.seqCopy(0, 1, 0, 50);
    const tail = promptOf(ctx, 90).slice(80);
    await feed(ctx, 1, tail, 50);
    const saved = ctx.seqStateGet(1);
    assert.equal(ctx.seqRemove(1, -1, -1), true);
    assert.equal(ctx.seqStateSet(3, saved), true);
    assert.equal(ctx.seqPosMax(3), 50 + tail.length - 1);
    assert.equal(ctx.seqPosMax(0), prompt.length - 1, 'the owner of the shared cells keeps them');
  } finally {
    ctx.close();
  }
});

test('restoring into a cache with too few free cells is refused and changes nothing', async () => {
  const ctx = await open(512);
  try {
    const saved = (await feed(ctx, 0, promptOf(ctx, 100), 0), ctx.seqStateGet(0));
    assert.equal(ctx.seqRemove(0, -1, -1), true);
    // 460 of 512 cells taken: the 100 saved ones do not fit.
    await feed(ctx, 1, promptOf(ctx, 460), 0);
    assert.equal(ctx.seqStateSet(2, saved), false);
    assert.equal(ctx.seqPosMax(2), -1);
    assert.equal(ctx.seqPosMax(1), 459);
    assert.throws(() => ctx.seqStateSet(2, 'not bytes' as unknown as Buffer), /expected a Buffer/);
  } finally {
    ctx.close();
  }
});

test('warm host memory: after prepareHostBytes a save copies into the touched mapping, and it restores exactly', async () => {
  const ctx = await open(1024);
  try {
    const prompt = promptOf(ctx, 200);
    const first = await feed(ctx, 0, prompt, 0);
    const cold = ctx.seqStateGet(0);
    // A fill of a mapping at least this large, on a libuv pool thread (unless the process-wide warm
    // set already holds one: a collected Buffer of an earlier test returns its mapping there).
    const before = ctx.hostBytesStats();
    if (ctx.prepareHostBytes(cold.length)) {
      assert.equal(ctx.prepareHostBytes(cold.length), false, 'one fill at a time');
      for (let i = 0; i < 3000 && ctx.hostBytesStats().numFills === before.numFills; i++) await new Promise((r) => setTimeout(r, 10));
      assert.equal(ctx.hostBytesStats().numFills, before.numFills + 1, 'the fill finished');
    }
    const filled = ctx.hostBytesStats();
    assert.ok(filled.numWarm >= 1 && filled.warmBytes >= cold.length, `a warm mapping waits: ${JSON.stringify(filled)}`);
    assert.equal(ctx.prepareHostBytes(cold.length), false, 'a warm mapping that large waits already');

    const warm = ctx.seqStateGet(0);
    const after = ctx.hostBytesStats();
    assert.equal(after.numWarmTakes, filled.numWarmTakes + 1, 'the second save went into warm memory');
    assert.deepEqual(warm, cold, 'the same bytes either way');
    // Restored from the warm copy, the sequence continues as the computed one.
    assert.equal(ctx.seqRemove(0, -1, -1), true);
    assert.equal(ctx.seqStateSet(1, warm), true);
    assert.equal(await feed(ctx, 1, [first], prompt.length), await feed(ctx, 0, [...prompt, first], 0));
  } finally {
    ctx.close();
  }
});
