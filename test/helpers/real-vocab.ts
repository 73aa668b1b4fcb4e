// Test models around real vocabularies: random weights in the `micro` shape with every tokenizer
// key of one of llama.cpp's vocab-only GGUFs (native/vendor/llama.cpp/models/ggml-vocab-*.gguf),
// optionally with one of llama.cpp's real chat templates (models/templates/*.jinja). Made once per
// (vocabulary, template) into models/test/ (gitignored) and reused by later test files.
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { makeModel } from '../../src/model/make-model.ts';
import { PRESETS } from '../../src/model/presets.ts';
import { LLAMA_TEMPLATES_DIR } from '../../src/model/default-model.ts';

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
export const LLAMA_MODELS_DIR = join(repoRoot, 'native', 'vendor', 'llama.cpp', 'models');

/** The vocabularies the real-model tests run on (file stem after `ggml-vocab-`). */
export const REAL_VOCABS = ['qwen2', 'llama-bpe', 'phi-3', 'gemma-4'] as const;
export type RealVocab = (typeof REAL_VOCABS)[number];

export function vocabPath(vocab: string): string {
  return join(LLAMA_MODELS_DIR, `ggml-vocab-${vocab}.gguf`);
}

/**
 * The test vectors llama.cpp ships with a vocabulary: [text, expected token ids] pairs. `.inp` holds
 * each text followed by a separator line; `.out` one line of ids per text.
 */
export function vocabVectors(vocab: string): Array<[string, number[]]> {
  const inp = readFileSync(`${vocabPath(vocab)}.inp`, 'utf8').split('\n__ggml_vocab_test__\n');
  const out = readFileSync(`${vocabPath(vocab)}.out`, 'utf8').split('\n');
  const pairs: Array<[string, number[]]> = [];
  for (let i = 0; i < inp.length - 1; i++) {
    const o = out[i];
    if (o === undefined) break;
    const ids = o.trim() === '' ? [] : o.trim().split(/\s+/).map(Number);
    pairs.push([inp[i]!, ids]);
  }
  return pairs;
}

/** A micro model with `vocab`'s tokenizer and, when given, a template from llama.cpp's models/templates. */
export function realVocabModel(vocab: string, template?: string): string {
  const name = `micro-${vocab}${template === undefined ? '' : `-${template.replace(/[^A-Za-z0-9.-]+/g, '_')}`}.gguf`;
  const out = join(repoRoot, 'models', 'test', name);
  if (!existsSync(out)) {
    mkdirSync(dirname(out), { recursive: true });
    const chatTemplate = template === undefined ? undefined : readFileSync(join(LLAMA_TEMPLATES_DIR, `${template}.jinja`), 'utf8');
    makeModel({ shape: PRESETS.micro, quant: 'f16', seed: 1, out, name: `micro-${vocab}`, vocabFrom: vocabPath(vocab), ...(chatTemplate === undefined ? {} : { chatTemplate }) });
  }
  return out;
}
