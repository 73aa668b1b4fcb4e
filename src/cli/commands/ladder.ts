// `headroom ladder`: the ablation ladder study (docs/ladder.md, src/harness/ladder/study.ts).
// Flags are checked here, each with a one-line "expected X, got Y"; the harness is imported
// inside the action so `--help` stays fast.
import type { Command } from 'commander';
import { InvalidArgumentError } from 'commander';
import path from 'node:path';
import { UserError } from '../user-error.ts';
import { positive, positiveInt } from '../option-parsers.ts';
import { DEFAULT_LADDER as D } from '../../harness/ladder/config.ts';

const nonNegative = (v: string): number => {
  const n = Number(v);
  if (v.trim() === '' || !(n >= 0) || !Number.isFinite(n)) throw new InvalidArgumentError(`expected a number >= 0, got '${v}'`);
  return n;
};
const list = <T>(each: (s: string) => T) => (v: string): T[] => {
  const parts = v.split(',').map((s) => s.trim());
  if (parts.some((s) => s === '')) throw new InvalidArgumentError(`expected a comma-separated list, got '${v}'`);
  return parts.map(each);
};
const seed = (v: string): number => {
  const n = Number(v);
  if (v.trim() === '' || !Number.isInteger(n) || n < 0) throw new InvalidArgumentError(`expected a non-negative integer seed, got '${v}'`);
  return n;
};

interface LadderFlags {
  out: string;
  runner: 'llama' | 'mock';
  model?: string;
  threads: number;
  mockSpeed: number;
  parallel: number;
  rungs: string[];
  seeds: number[];
  rates?: number[];
  grid: number[];
  calibrationS: number;
  durationS: number;
  warmupS: number;
  timeoutS: number;
  sloMs: number;
  tokensPerWord: number;
  maxSlipP99Ms: number;
  admissionArtifact?: string;
  admissionCalibrationTraces?: string;
  progress: boolean;
  dryRun: boolean;
}

export function registerLadderCommand(program: Command): void {
  program
    .command('ladder')
    .description('the ablation ladder: rungs 1-5 over a rate grid and seeds, a fresh server and a probe per run, resumable (docs/ladder.md)')
    .requiredOption('--out <dir>', 'study folder (an existing one is resumed: its finished runs are skipped)')
    .option('--runner <runner>', "every server's model runner: llama or mock (mock: tests and smoke runs only)", (v) => {
      if (v !== 'llama' && v !== 'mock') throw new InvalidArgumentError(`expected llama or mock, got '${v}'`);
      return v;
    }, 'llama')
    .option('--model <file>', 'GGUF model, relative to the repository root (default: the server default)')
    .option('--threads <n>', 'llama.cpp threads', positiveInt, D.threads)
    .option('--mock-speed <x>', 'mock runner cost multiplier', positive, D.mockSpeed)
    .option('--parallel <n>', 'sequence slots; also the calibration\'s closed-loop workers', positiveInt, D.parallel)
    .option('--rungs <ids>', 'rungs in ladder order (1-fifo,2-static,3-continuous,4-paged-prefix,5-admission-80,5-admission-95,5-admission-99)', list(String))
    .option('--seeds <list>', 'arrival/workload seeds, one block per (rate, seed)', list(seed), [...D.seeds])
    .option('--rates <list>', 'offered rates, req/s (default: from the closed-loop calibration x --grid)', list(positive))
    .option('--grid <list>', 'multiples of the calibrated capacity that make the rate grid', list(positive), [...D.gridMultipliers])
    .option('--calibration-s <s>', 'seconds of closed-loop calibration', positive, D.calibrationS)
    .option('--duration-s <s>', 'seconds of arrivals per run, warm-up included', positive, D.durationS)
    .option('--warmup-s <s>', 'arrivals in the first seconds are flagged warm-up and not counted', nonNegative, D.warmupS)
    .option('--timeout-s <s>', 'client timeout (a slower request is censored)', positive, D.timeoutS)
    .option('--slo-ms <ms>', 'the E2E SLO for goodput and every server\'s budget', positive, D.sloMs)
    .option('--tokens-per-word <r>', 'measured tokens per generated word (docs/benchmarks.md)', positive, D.tokensPerWord)
    .option('--max-slip-p99-ms <ms>', 'a run whose generator slips more is marked invalid', positive, D.maxSlipP99Ms)
    .option('--admission-artifact <file>', 'rung 5: offline predictor artifact (default: the online baseline; mock: results/gate/e2e-gbdt.json)')
    .option('--admission-calibration-traces <dir>', 'rung 5: warm-start traces (mock default: results/gate/collect/round-1)')
    .option('--no-progress', 'no progress bar')
    .option('--dry-run', 'print the run order and stop (rates must be given)', false)
    .action(async (f: LadderFlags) => {
      process.exitCode = await ladder(f);
    });
}

async function ladder(f: LadderFlags): Promise<number> {
  const { DEFAULT_LADDER, validateLadderConfig } = await import('../../harness/ladder/config.ts');
  const { RUNGS, planRuns } = await import('../../harness/ladder/plan.ts');
  const rungs = f.rungs ?? DEFAULT_LADDER.rungs;
  const unknown = rungs.filter((id) => !RUNGS.some((r) => r.id === id));
  if (unknown.length > 0) throw new UserError(`--rungs: expected ids from ${RUNGS.map((r) => r.id).join(', ')}, got '${unknown.join(',')}'`);
  const mock = f.runner === 'mock';
  const config = {
    ...DEFAULT_LADDER,
    runner: f.runner, model: f.model ?? null, threads: f.threads, mockSpeed: f.mockSpeed, parallel: f.parallel,
    rungs, seeds: f.seeds, rates: f.rates ?? null, gridMultipliers: f.grid, calibrationS: f.calibrationS,
    durationS: f.durationS, warmupS: f.warmupS, timeoutS: f.timeoutS, sloMs: f.sloMs, tokensPerWord: f.tokensPerWord, maxSlipP99Ms: f.maxSlipP99Ms,
    admissionArtifact: f.admissionArtifact ?? (mock ? 'results/gate/e2e-gbdt.json' : null),
    admissionCalibrationTraces: f.admissionCalibrationTraces ?? (mock ? 'results/gate/collect/round-1' : null),
  };
  try {
    validateLadderConfig(config);
  } catch (err) {
    throw new UserError((err as Error).message);
  }
  if (f.dryRun) {
    if (config.rates === null) throw new UserError('--dry-run: expected --rates (the calibration is a measurement)');
    for (const r of planRuns(config.rungs, config.rates, config.seeds)) process.stdout.write(`${r.index}\t${r.runId}\n`);
    return 0;
  }
  const { runLadder } = await import('../../harness/ladder/study.ts');
  const command = `headroom ${process.argv.slice(2).join(' ')}`;
  const log = (line: string): void => void process.stderr.write(line + '\n');
  let bar: { start(t: number, v: number, p?: Record<string, unknown>): void; update(v: number, p?: Record<string, unknown>): void; stop(): void } | null = null;
  if (f.progress) {
    const { default: cliProgress } = await import('cli-progress');
    bar = new cliProgress.SingleBar({ format: 'ladder [{bar}] {value}/{total} runs | ETA {etaText} | {last}', hideCursor: true, stream: process.stderr }, cliProgress.Presets.shades_classic);
  }
  const t0 = performance.now();
  const rows = await runLadder(config, path.normalize(f.out), {
    command,
    log,
    onStart: ({ numDone, numPlanned }) => bar?.start(numPlanned, numDone, { etaText: '-', last: numDone > 0 ? `resuming: ${numDone} done` : 'starting' }),
    onRun: ({ numDone, numPlanned, etaS, run, skipped }) => {
      if (bar === null) {
        log(`ladder: ${numDone}/${numPlanned} ${skipped ? 'skipped (done)' : 'ran'} ${run.runId}`);
        return;
      }
      const payload = { etaText: etaS === null ? '-' : formatS(etaS), last: `${skipped ? 'skipped' : 'ran'} ${run.runId}` };
      bar.update(numDone, payload);
    },
  });
  bar?.stop();
  const failed = rows.filter((r) => r.status !== 'ok');
  log(`ladder: ${rows.length - failed.length} runs done, ${failed.length} failed, in ${formatS((performance.now() - t0) / 1000)}; index ${path.join(f.out, 'ladder.json')}; report: headroom report ${f.out}`);
  return failed.length === 0 ? 0 : 1;
}

function formatS(s: number): string {
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  return h > 0 ? `${h} h ${m} min` : m > 0 ? `${m} min ${Math.round(s % 60)} s` : `${Math.round(s)} s`;
}
