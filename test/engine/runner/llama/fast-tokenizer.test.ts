// The addon's linear tokenizer (native/src/fast_tokenizer.h) gives exactly llama_tokenize's tokens,
// and it is linear where llama_tokenize is quadratic (byte fallback, many special tokens).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { ensureDefaultModel } from '../../../../src/model/default-model.ts';
import { loadLlamaAddon, llamaBinsDir } from '../../../../src/engine/runner/llama/addon.ts';
import type { AddonContext } from '../../../../src/engine/runner/llama/addon.ts';

async function open(): Promise<AddonContext> {
  const addon = loadLlamaAddon();
  return new addon.HeadroomLlama({ modelPath: await ensureDefaultModel(), binsDir: llamaBinsDir(), nCtx: 256, nCtxMax: 8192, nSeqMax: 1, nBatch: 64, nUbatch: 64, threads: 1, threadsBatch: 1, verbose: false });
}

const PIECES = ['a', 'b', ' ', '  ', 'the', ' the', 'é', '中', '\n', '\t', '<|im_start|>', '<|im_end|>', '<s>', '</s>', '<unk>', '\u0000', 'x', '😀', '<|im', '_start|>', '\u0001', 'server', ' request', '▁', 'ing', '<0x41>'];

test('the fast tokenizer matches llama_tokenize on random text (special tokens, spaces, bytes, NUL)', async () => {
  const ctx = await open();
  try {
    assert.equal(ctx.info().fastTokenizer, true, 'the tiny SPM model should take the fast path');
    fc.assert(
      fc.property(fc.array(fc.oneof(fc.constantFrom(...PIECES), fc.string({ unit: 'grapheme', maxLength: 4 })), { maxLength: 40 }), fc.boolean(), (parts, addSpecial) => {
        const text = parts.join('');
        assert.deepEqual(Array.from(ctx.tokenize(text, addSpecial, true)), Array.from(ctx.tokenize(text, addSpecial, true, true)), JSON.stringify(text));
      }),
      { numRuns: 3000, seed: 10 },
    );
  } finally {
    ctx.close();
  }
});

test('tokenizing is linear: 8x the input costs far less than 64x the time', async () => {
  const ctx = await open();
  try {
    const time = (text: string): number => {
      let best = Infinity;
      for (let i = 0; i < 3; i++) {
        const t0 = performance.now();
        ctx.tokenize(text, true, true);
        best = Math.min(best, performance.now() - t0);
      }
      return best;
    };
    for (const unit of ['é中', '<|im_start|>user\nword<|im_end|>\n']) {
      const small = time(unit.repeat(10_000));
      const large = time(unit.repeat(80_000));
      // Linear: ~8x. Quadratic (llama_tokenize): ~64x. 24x leaves room for a noisy machine.
      assert.ok(large < Math.max(small, 1) * 24, `${JSON.stringify(unit)}: 10k repeats ${small.toFixed(1)} ms, 80k ${large.toFixed(1)} ms`);
    }
  } finally {
    ctx.close();
  }
});
