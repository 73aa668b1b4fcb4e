// Generated models load in llama.cpp and produce varied, valid tokens (F16 and Q8_0).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { ensureDefaultModel } from '../../src/model/default-model.ts';
import { makeModel } from '../../src/model/make-model.ts';
import { PRESETS } from '../../src/model/presets.ts';
import { LlamaRunner } from '../../src/engine/runner/llama/llama-runner.ts';
import { asSeqId } from '../../src/engine/plan.ts';

for (const quant of ['f16', 'q8_0'] as const) {
  test(`a tiny ${quant} model loads and generates varied tokens`, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'headroom-model-'));
    try {
      const made = makeModel({ shape: PRESETS.tiny, quant, seed: 1, out: join(dir, `tiny-${quant}.gguf`) });
      const runner = new LlamaRunner({ modelPath: made.path, threads: 2, contextTokens: 1024, maxSequences: 2 });
      try {
        assert.equal(runner.info.details['numParams'], made.numParams);
        const prompt = runner.tokenizer.tokenize('the server keeps every request inside its budget', true);
        // Temperature 1 at every position: a random model's logits are nearly flat, so finite logits
        // give varied draws; NaN or inf logits would collapse every draw onto one token.
        const sampling = { temperature: 1, topP: 1, seed: 42 };
        const items = prompt.map((t, i) => ({ requestId: 'r', seqId: asSeqId(0), tokens: [t], startPos: i, sample: true, resetSampler: i === 0, sampling }));
        const res = await runner.execute({ kvOps: [], items });
        assert.ok(res.ok);
        const toks = res.sampled as number[];
        assert.ok(toks.every((t) => Number.isInteger(t) && t >= 0 && t < PRESETS.tiny.vocabSize));
        assert.ok(new Set(toks).size >= prompt.length / 2, `sampled tokens barely vary: ${toks.join(' ')}`);
      } finally {
        await runner.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
}

test('`model make --preset tiny` writes the default model byte for byte (admission artifacts name its hash)', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'headroom-model-'));
  try {
    const out = join(dir, 'tiny.gguf');
    const root = fileURLToPath(new URL('../../', import.meta.url));
    await promisify(execFile)(process.execPath, ['bin/headroom.mjs', 'model', 'make', '--preset', 'tiny', '--out', out], { cwd: root, timeout: 120_000 });
    const sha = (path: string): string => createHash('sha256').update(readFileSync(path)).digest('hex');
    assert.equal(sha(out), sha(await ensureDefaultModel()));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
