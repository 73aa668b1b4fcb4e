// The chat template comes from the GGUF when llama.cpp recognises it, ChatML otherwise, and
// /stats (runner.info.details) says which one is in use.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { makeModel } from '../../../../src/model/make-model.ts';
import { PRESETS } from '../../../../src/model/presets.ts';
import { openTinyRunner } from './fixture.ts';

const MICRO = { ...PRESETS.tiny, blockCount: 1, embeddingLength: 64, headCount: 2, headCountKv: 1, feedForwardLength: 128, vocabSize: 600 };
const messages = [
  { role: 'system', content: 'Be brief.' },
  { role: 'user', content: 'Hi there' },
];

async function templated(chatTemplate: string | undefined): Promise<{ text: string; source: unknown; tokens: number[] }> {
  const dir = mkdtempSync(join(tmpdir(), 'headroom-tmpl-'));
  try {
    const out = join(dir, 'm.gguf');
    makeModel({ shape: MICRO, quant: 'f16', seed: 1, out, ...(chatTemplate === undefined ? {} : { chatTemplate }) });
    const r = await openTinyRunner({ modelPath: out, contextTokens: 256 });
    try {
      const text = r.tokenizer.applyChatTemplate(messages);
      return { text, source: r.info.details['chatTemplate'], tokens: r.tokenizer.tokenize(text, true) };
    } finally {
      await r.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test('no template in the GGUF: ChatML, with its markers as single control tokens', async () => {
  const { text, source, tokens } = await templated(undefined);
  assert.equal(text, '<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n');
  assert.match(String(source), /^chatml/);
  assert.equal(tokens.filter((t) => t === 259).length, 3, 'each <|im_start|> should be one token (id 259)');
});

test('a recognised GGUF template is used', async () => {
  const llama2 = "{% for message in messages %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% endif %}{% endfor %}";
  const { text, source } = await templated(llama2);
  assert.equal(source, 'gguf');
  assert.match(text, /\[INST\]/);
  assert.doesNotMatch(text, /im_start/);
});

test('an unrecognised GGUF template falls back to ChatML and says so', async () => {
  const { text, source } = await templated('{{ something llama.cpp has never seen }}');
  assert.match(text, /^<\|im_start\|>system/);
  assert.match(String(source), /not recognised/);
});
