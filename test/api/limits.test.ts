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

const PIECES = ['<|im_start|>', '<|im_end|>', '<s>', '</s>', ' ', '\n', 'é', '中', '😀', '\u0000', 'the', ' river', 'x', 'headroom', '▁'];
const text = fc.array(fc.oneof(fc.constantFrom(...PIECES), fc.string({ unit: 'grapheme', maxLength: 6 })), { maxLength: 60 }).map((p) => p.join(''));
const role = fc.constantFrom('system', 'developer', 'user', 'assistant', 'tool');

async function checkBounds(r: Runner): Promise<void> {
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
      const r = await runner.encodeChat(messages);
      assert.ok(r.ok);
      const bytes = messages.reduce((n, m) => n + Buffer.byteLength(m.content.trim()) + info.templateBytesPerMessage, 0);
      assert.ok(minTokens(info, bytes) <= r.tokens.length, `bound ${minTokens(info, bytes)} > ${r.tokens.length} tokens`);
    }),
    { numRuns: 300, seed: 8 },
  );
  // And what cannot fit is refused before tokenizing.
  const long = 'a'.repeat(info.contextTokens * info.maxTokenBytes);
  assert.throws(() => checkPromptSize(info, long, null), (e: unknown) => e instanceof ApiError && e.code === 'context_length_exceeded');
  assert.throws(() => checkMessagesSize(info, [long], null), (e: unknown) => e instanceof ApiError && e.param === 'messages.0.content');
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
    await checkBounds(runner);
  } finally {
    await runner.close();
  }
});
