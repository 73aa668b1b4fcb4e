// `model make --vocab-from`: a random-weight model around a real vocabulary carries every tokenizer
// key byte for byte, loads in llama.cpp, and tokenizes llama.cpp's own test vectors for that
// vocabulary exactly.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readGgufMetadata } from '../../src/model/gguf-reader.ts';
import { loadLlamaAddon, llamaBinsDir } from '../../src/engine/runner/llama/addon.ts';
import { REAL_VOCABS, realVocabModel, vocabPath, vocabVectors } from '../helpers/real-vocab.ts';

for (const vocab of REAL_VOCABS) {
  test(`${vocab}: tokenizer keys copied byte for byte, llama.cpp's test vectors tokenize exactly`, async () => {
    const path = realVocabModel(vocab);
    const src = readGgufMetadata(vocabPath(vocab));
    const made = readGgufMetadata(path);
    let copied = 0;
    for (const [key, e] of src.entries) {
      if (!key.startsWith('tokenizer.')) continue;
      const m = made.entries.get(key);
      assert.ok(m !== undefined, `${key} missing`);
      assert.equal(m.type, e.type, `${key} type`);
      assert.ok(m.raw.equals(e.raw), `${key} bytes differ`);
      copied++;
    }
    assert.ok(copied >= 4, `only ${copied} tokenizer keys`);
    const addon = loadLlamaAddon();
    const ctx = new addon.HeadroomLlama({ modelPath: path, binsDir: llamaBinsDir(), nCtx: 256, nCtxMax: 256, nSeqMax: 1, nBatch: 64, nUbatch: 64, threads: 1, threadsBatch: 1, verbose: false });
    try {
      const vectors = vocabVectors(vocab);
      assert.ok(vectors.length >= 40, `${vectors.length} vectors`);
      for (const [text, ids] of vectors) {
        // llama.cpp's test-tokenizer-0: no BOS/EOS, special tokens not parsed; by llama_tokenize and
        // by the linear tokenizer with the whole text literal.
        assert.deepEqual(Array.from(ctx.tokenize(text, false, false)), ids, JSON.stringify(text));
        assert.deepEqual(Array.from((await ctx.tokenizeAsync(text, false, true)).tokens), ids, `linear: ${JSON.stringify(text)}`);
      }
    } finally {
      ctx.close();
    }
  });
}
