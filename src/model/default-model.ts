// The default model: models/tiny.gguf (the `tiny` preset, F16, seed 0), generated on first use in
// about a second. `npm start` serves it; tests use it. models/ is gitignored.
import { existsSync, mkdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { makeModel, modelName } from './make-model.ts';
import { PRESETS } from './presets.ts';

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

export const DEFAULT_MODEL_PATH = join(repoRoot, 'models', 'tiny.gguf');
/** The chat templates of real models that llama.cpp ships (npm install clones it), usable by name with --chat-template. */
export const LLAMA_TEMPLATES_DIR = join(repoRoot, 'native', 'vendor', 'llama.cpp', 'models', 'templates');
export const DEFAULT_MODEL_SEED = 0;

/** Returns the path of the default tiny model, generating it first if it is missing. */
export function ensureDefaultModel(path: string = DEFAULT_MODEL_PATH): Promise<string> {
  if (!existsSync(path)) {
    mkdirSync(dirname(path), { recursive: true });
    // writeGguf renames a finished temporary file into place, so concurrent callers never see half a model.
    makeModel({ shape: PRESETS.tiny, quant: 'f16', seed: DEFAULT_MODEL_SEED, out: path, name: modelName('tiny', 'f16') });
  }
  return Promise.resolve(path);
}
