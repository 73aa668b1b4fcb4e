// `headroom model make`: writes a random-weight llama GGUF from a preset (see src/model/presets.ts),
// with its own SPM vocabulary or a real model's (`--vocab-from`), and optionally a chat template.
import { Option } from 'commander';
import type { Command } from 'commander';
import { readFileSync } from 'node:fs';
import { basename, resolve } from 'node:path';
import { makeModel, modelName, QUANTS } from '../../model/make-model.ts';
import type { Quant } from '../../model/make-model.ts';
import { isPresetName, PRESET_NAMES, PRESETS } from '../../model/presets.ts';

interface MakeOpts {
  preset: string;
  quant: string;
  seed: string;
  out: string;
  vocabFrom?: string;
  chatTemplate?: string;
}

export function registerModelCommands(program: Command): void {
  const model = program.command('model').description('Generate models');
  model
    .command('make')
    .description('Write a llama-architecture GGUF with seeded random weights and a byte-fallback SPM tokenizer, or a real one (--vocab-from)')
    .addOption(new Option('--preset <name>', 'model shape').choices(PRESET_NAMES).default('tiny'))
    .addOption(new Option('--quant <type>', 'weight type').choices(QUANTS).default('f16'))
    .option('--seed <n>', 'RNG seed (same seed, same bytes)', '0')
    .requiredOption('--out <file>', 'output .gguf path')
    .option('--vocab-from <gguf>', "take another GGUF's tokenizer (every tokenizer.* key, chat template included), e.g. llama.cpp's models/ggml-vocab-*.gguf")
    .option('--chat-template <file>', 'store this Jinja file as tokenizer.chat_template')
    .action((opts: MakeOpts, cmd: Command) => {
      if (!isPresetName(opts.preset)) return cmd.error(`--preset: expected one of ${PRESET_NAMES.join(', ')}, got ${opts.preset}`);
      const seed = Number(opts.seed);
      if (!Number.isInteger(seed) || seed < 0) return cmd.error(`--seed: expected a non-negative integer, got ${opts.seed}`);
      const t0 = performance.now();
      const out = resolve(opts.out);
      let chatTemplate: string | undefined;
      if (opts.chatTemplate !== undefined) {
        try {
          chatTemplate = readFileSync(opts.chatTemplate, 'utf8');
        } catch (err) {
          return cmd.error(`--chat-template: cannot read ${opts.chatTemplate} (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
        }
      }
      const vocabName = opts.vocabFrom === undefined ? '' : `-${basename(opts.vocabFrom, '.gguf').replace(/^ggml-vocab-/, '')}`;
      let made;
      try {
        made = makeModel({
          shape: PRESETS[opts.preset],
          quant: opts.quant as Quant,
          seed,
          out,
          name: modelName(opts.preset, opts.quant as Quant) + vocabName,
          ...(opts.vocabFrom !== undefined ? { vocabFrom: resolve(opts.vocabFrom) } : {}),
          ...(chatTemplate !== undefined ? { chatTemplate } : {}),
        });
      } catch (err) {
        return cmd.error(`model make: ${err instanceof Error ? err.message : String(err)}`);
      }
      const mib = (made.bytes / 2 ** 20).toFixed(1);
      const params = (made.numParams / 1e6).toFixed(1);
      process.stdout.write(`${out}: ${params}M params, ${mib} MiB, ${((performance.now() - t0) / 1000).toFixed(1)} s\n`);
    });
}
