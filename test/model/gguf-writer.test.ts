// The GGUF writer and the random-model generator: layout, determinism, number formats.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import fc from 'fast-check';
import { GgmlType, tensorBytes, writeGguf } from '../../src/model/gguf-writer.ts';
import type { KvValue } from '../../src/model/gguf-writer.ts';
import { constantF32, randomTensor, toHalfBits } from '../../src/model/random-weights.ts';
import { makeModel } from '../../src/model/make-model.ts';
import { countParams, PRESETS } from '../../src/model/presets.ts';
import { buildSpmVocab, TokenType } from '../../src/model/spm-vocab.ts';

function withTmp<T>(fn: (dir: string) => T): T {
  const dir = mkdtempSync(join(tmpdir(), 'headroom-gguf-'));
  try {
    return fn(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Reads a half-precision bit pattern back to a number (reference decoder). */
function fromHalfBits(h: number): number {
  const s = h & 0x8000 ? -1 : 1;
  const e = (h >> 10) & 0x1f;
  const m = h & 0x3ff;
  if (e === 0) return s * m * 2 ** -24;
  if (e === 31) return m ? NaN : s * Infinity;
  return s * (1 + m / 1024) * 2 ** (e - 15);
}

test('toHalfBits matches known values and rounds to the nearest half', () => {
  assert.equal(toHalfBits(0), 0);
  assert.equal(toHalfBits(1), 0x3c00);
  assert.equal(toHalfBits(-2), 0xc000);
  assert.equal(toHalfBits(65504), 0x7bff);
  assert.equal(toHalfBits(1e6), 0x7c00);
  assert.equal(toHalfBits(2 ** -24), 0x0001);
  fc.assert(
    fc.property(fc.double({ min: -60000, max: 60000, noNaN: true }), (x) => {
      const h = toHalfBits(x);
      const y = fromHalfBits(h);
      // No other half is closer: check both neighbours.
      const up = fromHalfBits(h + 1);
      const down = h & 0x7fff ? fromHalfBits(h - 1) : y;
      return Math.abs(y - x) <= Math.abs(up - x) && Math.abs(y - x) <= Math.abs(down - x);
    }),
    { numRuns: 2000, seed: 3 },
  );
});

test('the header, KV entries, tensor infos and data alignment follow GGUF v3', () => {
  withTmp((dir) => {
    const md = new Map<string, KvValue>([
      ['general.architecture', { type: 'string', value: 'llama' }],
      ['x.n', { type: 'u32', value: 7 }],
    ]);
    const path = join(dir, 'a.gguf');
    const size = writeGguf(path, md, [
      { name: 'a', dims: [3], type: GgmlType.F32, produce: constantF32(3, 1.5) },
      { name: 'b', dims: [32, 2], type: GgmlType.Q8_0, produce: randomTensor(GgmlType.Q8_0, 64, 0.02, 1) },
    ]);
    const buf = readFileSync(path);
    assert.equal(buf.length, size);
    assert.equal(buf.toString('ascii', 0, 4), 'GGUF');
    assert.equal(buf.readUInt32LE(4), 3);
    assert.equal(buf.readBigUInt64LE(8), 2n);
    assert.equal(buf.readBigUInt64LE(16), 2n);
    // Tensor a's data (three 1.5 floats) starts on a 32-byte boundary and tensor b follows at the
    // next one: 12 bytes of a, padded to 32, then 2 Q8_0 blocks of 34 bytes.
    const dataStart = size - 32 - tensorBytes(GgmlType.Q8_0, 64) - (32 - ((32 + 68) % 32)) % 32;
    assert.equal(dataStart % 32, 0);
    assert.equal(buf.readFloatLE(dataStart), 1.5);
    assert.equal(buf.readFloatLE(dataStart + 8), 1.5);
  });
});

test('a model is deterministic for a seed and differs across seeds', () => {
  withTmp((dir) => {
    const shape = { ...PRESETS.tiny, blockCount: 1, vocabSize: 600, embeddingLength: 64, headCount: 2, headCountKv: 1, feedForwardLength: 128 };
    const a = makeModel({ shape, quant: 'q8_0', seed: 5, out: join(dir, 'a.gguf') });
    const b = makeModel({ shape, quant: 'q8_0', seed: 5, out: join(dir, 'b.gguf') });
    const c = makeModel({ shape, quant: 'q8_0', seed: 6, out: join(dir, 'c.gguf') });
    assert.equal(a.numParams, countParams(shape));
    assert.deepEqual(readFileSync(a.path), readFileSync(b.path));
    assert.notDeepEqual(readFileSync(a.path), readFileSync(c.path));
  });
});

test('the tiny preset is about 20M parameters and the 0.5b preset about 0.5B', () => {
  const tiny = countParams(PRESETS.tiny);
  const big = countParams(PRESETS['0.5b']);
  assert.ok(tiny > 15e6 && tiny < 25e6, `tiny has ${tiny} params`);
  assert.ok(big > 450e6 && big < 550e6, `0.5b has ${big} params`);
});

test('the SPM vocabulary has unique tokens, 256 byte tokens in order, and every word prefix', () => {
  for (const size of [600, 8000, 32000]) {
    const v = buildSpmVocab(size);
    assert.equal(v.tokens.length, size);
    assert.equal(new Set(v.tokens).size, size);
    for (let b = 0; b < 256; b++) {
      assert.equal(v.types[3 + b], TokenType.BYTE);
      assert.equal(v.tokens[3 + b], `<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`);
    }
    const set = new Set(v.tokens);
    for (let i = 0; i < size; i++) {
      const tok = v.tokens[i]!;
      if (v.types[i] !== TokenType.NORMAL || [...tok].length < 3) continue;
      assert.ok(set.has(tok.slice(0, -1)), `prefix of ${tok} missing: SPM could never merge up to it`);
    }
  }
});

test('writeGguf makes the folders of a path that does not exist yet', () => {
  withTmp((dir) => {
    const path = join(dir, 'models', 'nested', 'empty.gguf');
    const bytes = writeGguf(path, new Map<string, KvValue>([['general.architecture', { type: 'string', value: 'llama' }]]), []);
    assert.equal(readFileSync(path).length, bytes);
    assert.equal(readFileSync(path).subarray(0, 4).toString('latin1'), 'GGUF');
  });
});
