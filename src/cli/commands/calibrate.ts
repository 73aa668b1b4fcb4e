// `headroom calibrate --model FILE`: measures the llama runner on this machine and writes
// results/runs/calibration/<model>.json (--out-dir results/calibration updates the committed record) with the machine, thread count and source hash.
import type { Command } from 'commander';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, release, totalmem } from 'node:os';
import { basename, join, resolve } from 'node:path';
import { LlamaRunner } from '../../engine/runner/llama/llama-runner.ts';
import { calibrate } from '../../engine/runner/llama/calibrate.ts';
import { UserError } from '../user-error.ts';

interface CalibrateOpts {
  model: string;
  threads: string;
  outDir: string;
  repeats: string;
  steps: string;
  batches: string;
}

function git(args: string[]): string {
  try {
    return execFileSync('git', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return 'unknown';
  }
}

function positive(name: string, v: string): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1) throw new UserError(`${name}: expected a positive integer, got '${v}'`);
  return n;
}

export function registerCalibrateCommand(program: Command): void {
  program
    .command('calibrate')
    .description('Measure prefill/decode throughput and per-step addon overhead of the llama runner on this machine')
    .requiredOption('--model <file>', 'GGUF model to calibrate')
    .option('--threads <n>', 'llama.cpp threads', '2')
    .option('--out-dir <dir>', 'where to write <model>.json (the committed records are in results/calibration)', 'results/runs/calibration')
    .option('--repeats <n>', 'prefill and mixed-step repeats', '5')
    .option('--steps <n>', 'decode steps per batch size', '24')
    .option('--batches <list>', 'decode batch sizes', '1,4,8,16')
    .action(async (opts: CalibrateOpts) => {
      const threads = positive('--threads', opts.threads);
      const batches = opts.batches.split(',').map((b) => positive('--batches', b));
      const modelPath = resolve(opts.model);
      if (!existsSync(modelPath)) throw new UserError(`model file not found: ${opts.model}`);
      const maxBatch = Math.max(...batches);
      const runner = new LlamaRunner({ modelPath, threads, maxSequences: Math.max(maxBatch, 9), maxBatchTokens: 512, contextTokens: 4096 });
      const log = (line: string): void => void process.stderr.write(`[calibrate] ${line}\n`);
      log(`${basename(modelPath)}: ${String(runner.info.details['description'])}, ${threads} threads`);
      const startedAt = new Date().toISOString();
      const loadBefore = loadavg().map((x) => Math.round(x * 100) / 100);
      const results = await calibrate(runner, {
        prefillRepeats: positive('--repeats', opts.repeats),
        decodeSteps: positive('--steps', opts.steps),
        batches,
        contextPerSeq: 128,
        log,
      });
      await runner.close();
      const cpu = cpus()[0];
      const modelName = basename(modelPath).replace(/\.gguf$/i, '');
      const record = {
        model: {
          name: modelName,
          file: basename(modelPath),
          ...runner.info.details,
          modelPath: undefined,
          contextTokens: runner.info.contextTokens,
        },
        machine: {
          cpu: cpu?.model ?? 'unknown',
          logicalCores: cpus().length,
          memoryGiB: Math.round(totalmem() / 2 ** 30),
          kernel: release(),
          node: process.version,
          // Other work on this shared machine while calibrating (1/5/15-minute load averages).
          loadAverageBefore: loadBefore,
          loadAverageAfter: loadavg().map((x) => Math.round(x * 100) / 100),
        },
        threads,
        source: {
          commit: git(['rev-parse', 'HEAD']),
          dirty: git(['status', '--porcelain', '--', 'native', 'src/engine/runner']) !== '',
        },
        command: `headroom calibrate --model ${opts.model} --threads ${threads} --repeats ${opts.repeats} --steps ${opts.steps} --batches ${opts.batches}`,
        startedAt,
        notes:
          'Medians with min/max over repeats on a shared 2-core machine. executeMs is the JS-side time of one ' +
          'LlamaRunner.execute(); decodeMs is the C++-side time of llama_decode; overhead = execute − decode − sampling.',
        results,
      };
      mkdirSync(opts.outDir, { recursive: true });
      // The default thread count owns <model>.json; other counts get a -t<N> suffix.
      const out = join(opts.outDir, `${modelName}${threads === 2 ? '' : `-t${threads}`}.json`);
      writeFileSync(out, `${JSON.stringify(record, null, 2)}\n`);
      log(`wrote ${out}`);
    });
}
