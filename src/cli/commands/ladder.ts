// `headroom ladder`: the ablation ladder study (docs/ladder.md, src/harness/ladder/study.ts).
// Flags are checked here, each with a one-line "expected X, got Y"; the harness is imported
// inside the action so `--help` stays fast.
import type { Command } from 'commander';
import path from 'node:path';
import { UserError } from '../user-error.ts';
import { anyText, existingDir, existingFile, intAtLeast0, intAtLeast1, listOf, num, numberAtLeast0, oneOf, positiveNumber } from '../option-parsers.ts';
import type { OptionValues } from '../option-table.ts';
import { addOptions, choice, flag, opt, readOptions } from '../option-table.ts';
import { DEFAULT_LADDER as D } from '../../harness/ladder/config.ts';
import { WORKLOAD_KINDS } from '../../harness/workloads.ts';

export const LADDER_OPTIONS = [
  opt('--out <dir>', 'study folder (an existing one is resumed: its finished runs are skipped)', anyText, { required: true }),
  // Not commander's choices: "expected llama or mock" is the line users and tests know.
  opt('--runner <runner>', "every server's model runner: llama or mock (mock: tests and smoke runs only)", oneOf(['llama', 'mock']), { default: 'llama' }),
  opt('--model <file>', 'GGUF model, relative to the repository root (default: the server default)', existingFile),
  opt('--threads <n>', 'llama.cpp threads', intAtLeast1, { default: String(D.threads) }),
  opt('--mock-speed <x>', 'mock runner cost multiplier', positiveNumber, { default: String(D.mockSpeed) }),
  opt('--parallel <n>', "sequence slots; also the calibration's closed-loop workers", intAtLeast1, { default: String(D.parallel) }),
  // Which ids exist is the harness's to say: checked in the action, before anything runs.
  opt('--rungs <ids>', 'rungs in ladder order (1-fifo,2-static,3-continuous,4-paged-prefix,5-admission-80,5-admission-95,5-admission-99)', listOf(anyText)),
  opt('--seeds <list>', 'arrival/workload seeds, one block per (rate, seed)', listOf(intAtLeast0), { default: D.seeds.join(',') }),
  opt('--rates <list>', 'offered rates, req/s (default: from the closed-loop calibration x --grid)', listOf(positiveNumber)),
  opt('--grid <list>', 'multiples of the calibrated capacity that make the rate grid', listOf(positiveNumber), { default: D.gridMultipliers.join(',') }),
  opt('--calibration-s <s>', 'seconds of closed-loop calibration', num('a number of seconds > 1', (n) => n > 1), { default: String(D.calibrationS) }),
  opt('--duration-s <s>', 'seconds of arrivals per run, warm-up included', positiveNumber, { default: String(D.durationS) }),
  opt('--warmup-s <s>', 'arrivals in the first seconds are flagged warm-up and not counted', numberAtLeast0, { default: String(D.warmupS) }),
  opt('--timeout-s <s>', 'client timeout (a slower request is censored)', positiveNumber, { default: String(D.timeoutS) }),
  opt('--slo-ms <ms>', "the E2E SLO for goodput and every server's budget", positiveNumber, { default: String(D.sloMs) }),
  opt('--tokens-per-word <r>', 'measured tokens per generated word (docs/benchmarks.md)', positiveNumber, { default: String(D.tokensPerWord) }),
  opt('--max-slip-p99-ms <ms>', 'a run whose generator slips more is marked invalid', positiveNumber, { default: String(D.maxSlipP99Ms) }),
  choice('--workload <kind>', 'request mix (*-natural: outputs end at EOS, a length unknown in advance; docs/bench.md)', WORKLOAD_KINDS, D.workload),
  opt('--admission-artifact <file>', 'rung 5: an offline predictor artifact (default: none, the shipped admission learned online from its own outcomes)', existingFile),
  opt('--admission-calibration-traces <dir>', 'rung 5, with --admission-artifact: warm-start traces', existingDir),
  flag('--no-progress', 'no progress bar'),
  flag('--dry-run', 'print the run order and stop (rates must be given)'),
];

type LadderOptions = OptionValues<typeof LADDER_OPTIONS>;

export function registerLadderCommand(program: Command): void {
  const cmd = program
    .command('ladder')
    .description('the ablation ladder: rungs 1-5 over a rate grid and seeds, a fresh server and a probe per run, resumable (docs/ladder.md)');
  addOptions(cmd, LADDER_OPTIONS, 'on-parse').action(async (_flags: unknown, c: Command) => {
    process.exitCode = await ladder(readOptions(c, LADDER_OPTIONS));
  });
}

async function ladder(f: LadderOptions): Promise<number> {
  const { DEFAULT_LADDER, validateLadderConfig } = await import('../../harness/ladder/config.ts');
  const { RUNGS, planRuns } = await import('../../harness/ladder/plan.ts');
  const rungs = f.rungs ?? DEFAULT_LADDER.rungs;
  const unknown = rungs.filter((id) => !RUNGS.some((r) => r.id === id));
  if (unknown.length > 0) throw new UserError(`--rungs: expected ids from ${RUNGS.map((r) => r.id).join(', ')}, got '${unknown.join(',')}'`);
  if (f.admissionCalibrationTraces !== undefined && f.admissionArtifact === undefined) {
    throw new UserError('--admission-calibration-traces: expected --admission-artifact with it (warm-start traces calibrate an artifact)');
  }
  const config = {
    ...DEFAULT_LADDER,
    runner: f.runner, model: f.model ?? null, threads: f.threads, mockSpeed: f.mockSpeed, parallel: f.parallel, workload: f.workload,
    rungs, seeds: f.seeds, rates: f.rates ?? null, gridMultipliers: f.grid, calibrationS: f.calibrationS,
    durationS: f.durationS, warmupS: f.warmupS, timeoutS: f.timeoutS, sloMs: f.sloMs, tokensPerWord: f.tokensPerWord, maxSlipP99Ms: f.maxSlipP99Ms,
    admissionArtifact: f.admissionArtifact ?? null,
    admissionCalibrationTraces: f.admissionCalibrationTraces ?? null,
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
