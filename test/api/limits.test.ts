// The pre-tokenization size checks (src/api/limits.ts) never refuse a prompt that fits: on random
// text (special tokens, multi-byte characters, NUL, byte fallback) the lower bound they use is at
// most the real token count, for both runners, for completions and for chat. And they do refuse
// what cannot fit.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { checkMessagesSize, checkPromptSize, minTokens } from '../../src/api/limits.ts';
import type { SizeFacts } from '../../src/api/limits.ts';
import { ApiError } from '../../src/api/errors.ts';
import { MockRunner } from '../../src/engine/runner/mock/mock-runner.ts';
import type { Runner } from '../../src/engine/runner/runner.ts';
import { openTinyRunner } from '../engine/runner/llama/fixture.ts';
import { LlamaRunner } from '../../src/engine/runner/llama/llama-runner.ts';
import { realVocabModel } from '../helpers/real-vocab.ts';

const PIECES = ['<|im_start|>', '<|im_end|>', '<s>', '</s>', ' ', '\n', 'é', '中', '😀', '\u0000', 'the', ' river', 'x', 'headroom', '▁'];
const text = fc.array(fc.oneof(fc.constantFrom(...PIECES), fc.string({ unit: 'grapheme', maxLength: 6 })), { maxLength: 60 }).map((p) => p.join(''));
const role = fc.constantFrom('system', 'developer', 'user', 'assistant', 'tool');

async function checkBounds(r: Runner, allowRefusals = false): Promise<void> {
  const runner = r.tokenizer;
  const info: SizeFacts = { contextTokens: r.info.contextTokens, maxTokenBytes: runner.maxTokenBytes, templateBytesPerMessage: runner.templateBytesPerMessage };
  await fc.assert(
    fc.asyncProperty(text, async (t) => {
      const tokens = (await runner.encodeText(t, false)).length;
      assert.ok(minTokens(info, Buffer.byteLength(t)) <= tokens, `${JSON.stringify(t)}: bound ${minTokens(info, Buffer.byteLength(t))} > ${tokens} tokens`);
    }),
    { numRuns: 500, seed: 7 },
  );
  await fc.assert(
    fc.asyncProperty(fc.array(fc.record({ role, content: text }), { minLength: 1, maxLength: 6 }), async (messages) => {
      const r = await runner.encodeChat({ messages });
      if (!r.ok) {
        // A real template may refuse a conversation (roles out of order): then there is no count to bound.
        assert.ok(allowRefusals, `${r.reason}: ${r.message}`);
        return;
      }
      const counted = messages.reduce((n, m) => n + (m.role === 'assistant' ? 0 : Buffer.byteLength(m.content.trim())), 0);
      const bytes = counted + Math.max(0, messages.length - 2) * info.templateBytesPerMessage;
      assert.ok(minTokens(info, bytes) <= r.tokens.length, `bound ${minTokens(info, bytes)} > ${r.tokens.length} tokens`);
    }),
    { numRuns: 300, seed: 8 },
  );
  // And what cannot fit is refused before tokenizing.
  const long = 'a'.repeat(info.contextTokens * info.maxTokenBytes);
  assert.throws(() => checkPromptSize(info, long, null), (e: unknown) => e instanceof ApiError && e.code === 'context_length_exceeded');
  assert.throws(() => checkMessagesSize(info, [{ role: 'user', content: long }], null), (e: unknown) => e instanceof ApiError && e.param === 'messages.0.content');
  assert.doesNotThrow(() => checkPromptSize(info, 'a'.repeat(info.contextTokens - 1), null));
}

test('mock runner: the size checks\' token lower bound never exceeds the real count', async () => {
  await checkBounds(new MockRunner({ contextTokens: 512 }));
});

test('llama runner: the size checks\' token lower bound never exceeds the real count', async () => {
  const runner = await openTinyRunner({ threads: 1, contextTokens: 512, maxSequences: 2 });
  try {
    assert.equal(runner.tokenizer.maxTokenBytes, 12);
    assert.ok(runner.tokenizer.templateBytesPerMessage > 0);
    await checkBounds(runner, true);
  } finally {
    await runner.close();
  }
});

for (const [vocab, template] of [
  ['qwen2', 'Qwen-Qwen2.5-7B-Instruct'],
  ['llama-bpe', 'meta-llama-Llama-3.1-8B-Instruct'],
  ['gemma-4', 'google-gemma-4-31B-it'],
] as const) {
  test(`real vocabulary and template (${vocab}, ${template}): the lower bound never exceeds the real count`, async () => {
    const runner = new LlamaRunner({ modelPath: realVocabModel(vocab, template), threads: 1, contextTokens: 512, maxSequences: 2 });
    try {
      // Gemma 4's template drops an empty turn, so it promises no bytes per message (0 is always safe).
      if (vocab !== 'gemma-4') assert.ok(runner.tokenizer.templateBytesPerMessage > 0, 'the template adds bytes per message');
      await checkBounds(runner, true);
    } finally {
      await runner.close();
    }
  });
}
