// Streaming text out of a byte-fallback vocabulary: characters outside the vocabulary arrive as
// single-byte tokens, so a naive per-token decode would emit U+FFFD halves. The detokenizer must
// emit, chunk by chunk, exactly what decoding all bytes at once gives; and end-of-generation
// tokens must end a generation with finish reason 'stop' (max tokens: 'length').
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import fc from 'fast-check';
import type { LlamaRunner } from '../../../../src/engine/runner/llama/llama-runner.ts';
import { makeModel } from '../../../../src/model/make-model.ts';
import { PRESETS } from '../../../../src/model/presets.ts';
import { DEFAULT_MODEL_SEED } from '../../../../src/model/default-model.ts';
import type { Runner } from '../../../../src/engine/runner/runner.ts';
import { item, openTinyRunner, plan, run } from './fixture.ts';

let runner: LlamaRunner;
before(async () => {
  runner = await openTinyRunner();
});
after(async () => {
  await runner.close();
});

/** Streams `tokens` through a fresh detokenizer; returns the chunks (flush last). */
function stream(r: Runner, tokens: readonly number[]): string[] {
  const d = r.tokenizer.detokenizer();
  const chunks = tokens.map((t) => d.push(t));
  chunks.push(d.flush());
  return chunks;
}

const isWellFormed = (s: string): boolean => !/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(s);

test('multi-byte characters split over byte tokens are never emitted in halves', () => {
  const text = 'naïve café — 日本語のテキスト 🙂👍🏽 Ελληνικά';
  const tokens = runner.tokenizer.tokenize(text, false);
  assert.ok(tokens.length > [...text].length / 2, 'expected byte-fallback tokens for non-ASCII text');
  const chunks = stream(runner, tokens);
  for (const c of chunks) {
    assert.ok(!c.includes('\uFFFD'), `chunk ${JSON.stringify(c)} holds a replacement character`);
    assert.ok(isWellFormed(c), `chunk ${JSON.stringify(c)} is not well-formed`);
  }
  // SPM adds a leading space to the first word.
  assert.equal(chunks.join('').trimStart(), text);
});

test('property: streaming any text round-trips it, chunk by chunk', () => {
  fc.assert(
    fc.property(fc.string({ unit: 'grapheme', maxLength: 40 }), (text) => {
      const chunks = stream(runner, runner.tokenizer.tokenize(text, false));
      for (const c of chunks) if (!isWellFormed(c) || c.includes('\uFFFD')) return false;
      // SPM prepends a space to non-empty text.
      return chunks.join('') === (text.length === 0 ? '' : ` ${text}`);
    }),
    { numRuns: 200, seed: 7 },
  );
});

test('property: random token streams equal the one-shot decode of their bytes', () => {
  const byteTokens = runner.tokenizer.tokenize('日本🙂é', false).filter((t) => t >= 3 && t < 259);
  fc.assert(
    fc.property(fc.array(fc.oneof(fc.constantFrom(...byteTokens), fc.integer({ min: 3, max: 600 })), { maxLength: 30 }), (tokens) => {
      const chunks = stream(runner, tokens);
      // Reference: all bytes decoded at once.
      const bytes = Buffer.concat(tokens.map((t) => runnerPiece(t)));
      return chunks.join('') === new TextDecoder().decode(bytes) && chunks.every(isWellFormed);
    }),
    { numRuns: 300, seed: 11 },
  );
});

/** The raw bytes of a token, read through a detokenizer that buffers nothing at the end. */
function runnerPiece(t: number): Buffer {
  // Feed a lone token then flush: for a complete piece that is its text; a lone byte of a
  // multi-byte character comes back as U+FFFD, so read byte tokens from their <0xXX> id instead.
  if (t >= 3 && t < 259) return Buffer.from([t - 3]);
  const d = runner.tokenizer.detokenizer();
  return Buffer.from(d.push(t) + d.flush(), 'utf8');
}

/** A generation loop at the runner level: greedy until an EOG token or maxTokens. */
async function generate(r: Runner, prompt: readonly number[], maxTokens: number): Promise<{ tokens: number[]; finish: 'stop' | 'length' }> {
  const tokens: number[] = [];
  let next = (await run(r as LlamaRunner, plan([item(0, prompt, 0, true, true)])))[0]!;
  for (let i = 0; ; i++) {
    if (r.tokenizer.isEog(next)) return { tokens, finish: 'stop' };
    tokens.push(next);
    if (tokens.length >= maxTokens) return { tokens, finish: 'length' };
    next = (await run(r as LlamaRunner, plan([item(0, [next], prompt.length + i)])))[0]!;
  }
}

test('EOS ends generation with finish_reason stop; max tokens with length', async () => {
  assert.ok(runner.tokenizer.isEog(2), '</s> must be end-of-generation');
  assert.ok(runner.tokenizer.isEog(runner.tokenizer.tokenize('<|im_end|>', false)[0]!), '<|im_end|> must be end-of-generation');
  const prompt = runner.tokenizer.tokenize('the queue and the server', true);
  const free = await generate(runner, prompt, 12);
  assert.equal(free.finish, 'length');
  assert.equal(free.tokens.length, 12);
  assert.ok(free.tokens.every((t) => !runner.tokenizer.isEog(t)));

  // The same weights with EOS pointed at the token the model emits 5th: generation must stop there.
  const dir = mkdtempSync(join(tmpdir(), 'headroom-eos-'));
  const eosToken = free.tokens[4]!;
  const firstAt = free.tokens.indexOf(eosToken);
  try {
    const model = makeModel({ shape: PRESETS.tiny, quant: 'f16', seed: DEFAULT_MODEL_SEED, out: join(dir, 'eos.gguf'), eosTokenId: eosToken });
    const r2 = await openTinyRunner({ modelPath: model.path });
    try {
      assert.ok(r2.tokenizer.isEog(eosToken));
      const stopped = await generate(r2, prompt, 12);
      assert.equal(stopped.finish, 'stop');
      assert.deepEqual(stopped.tokens, free.tokens.slice(0, firstAt));
    } finally {
      await r2.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
