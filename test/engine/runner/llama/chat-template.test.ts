// The chat template is the GGUF's own Jinja template, rendered by llama.cpp's chat code; ChatML
// when the GGUF has none; /stats (runner.info.details) says which one is in use; a template that
// does not parse fails the load with the engine's reason.
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
  assert.equal(source, 'chatml (none in GGUF)');
  assert.equal(tokens.filter((t) => t === 259).length, 3, 'each <|im_start|> should be one token (id 259)');
});

test("the GGUF's Jinja template is rendered, whatever its markup", async () => {
  // A template llama.cpp's old pattern matcher never knew: only a Jinja engine renders it.
  const tmpl = "{% for m in messages %}<<{{ m['role'] | upper }}>>{{ m['content'] | trim }}{% if not loop.last %}{{ '\\n' }}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '\\n' }}<<ASSISTANT>>{% endif %}";
  const { text, source } = await templated(tmpl);
  assert.equal(source, 'gguf');
  assert.equal(text, '<<SYSTEM>>Be brief.\n<<USER>>Hi there\n<<ASSISTANT>>');
});

test('a GGUF template that does not parse fails the load with the reason', async () => {
  await assert.rejects(templated('{% for m in messages %}{{ m.content }'), /chat template[^]*(parse|expected|unexpected)/i);
});
