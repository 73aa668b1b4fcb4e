// `headroom model make`: writes a random-weight llama GGUF from a preset (see src/model/presets.ts).
import { Option } from 'commander';
import type { Command } from 'commander';
import { resolve } from 'node:path';
import { makeModel, modelName, QUANTS } from '../../model/make-model.ts';
import type { Quant } from '../../model/make-model.ts';
import { isPresetName, PRESET_NAMES, PRESETS } from '../../model/presets.ts';

interface MakeOpts {
  preset: string;
  quant: string;
  seed: string;
  out: string;
}

export function registerModelCommands(program: Command): void {
  const model = program.command('model').description('Generate models');
  model
    .command('make')
    .description('Write a llama-architecture GGUF with seeded random weights and a byte-fallback SPM tokenizer')
    .addOption(new Option('--preset <name>', 'model shape').choices(PRESET_NAMES).default('tiny'))
    .addOption(new Option('--quant <type>', 'weight type').choices(QUANTS).default('f16'))
    .option('--seed <n>', 'RNG seed (same seed, same bytes)', '0')
    .requiredOption('--out <file>', 'output .gguf path')
    .action((opts: MakeOpts, cmd: Command) => {
      if (!isPresetName(opts.preset)) return cmd.error(`--preset: expected one of ${PRESET_NAMES.join(', ')}, got ${opts.preset}`);
      const seed = Number(opts.seed);
      if (!Number.isInteger(seed) || seed < 0) return cmd.error(`--seed: expected a non-negative integer, got ${opts.seed}`);
      const t0 = performance.now();
      const out = resolve(opts.out);
      const made = makeModel({
        shape: PRESETS[opts.preset],
        quant: opts.quant as Quant,
        seed,
        out,
        name: modelName(opts.preset, opts.quant as Quant),
      });
      const mib = (made.bytes / 2 ** 20).toFixed(1);
      const params = (made.numParams / 1e6).toFixed(1);
      process.stdout.write(`${out}: ${params}M params, ${mib} MiB, ${((performance.now() - t0) / 1000).toFixed(1)} s\n`);
    });
}
