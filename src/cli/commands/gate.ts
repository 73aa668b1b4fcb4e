// `headroom gate`: the CI load gate (docs/ci-gate.md). A fresh mock-runner server with admission
// on per rate, an open-loop run at each of the baseline's rates, the verdict against the committed
// baseline. Exit 0 pass, 1 regression, 2 invalid run. Errors before anything was measured (an
// unreadable baseline) are invalid runs too (2), so 1 always means "measured, and worse".
import type { Command } from 'commander';
import path from 'node:path';
import { mkdir, writeFile } from 'node:fs/promises';
import { oneOf, positive, positiveInt } from '../option-parsers.ts';
import type { WorkloadKind } from '../../harness/workloads.ts';
import { WORKLOAD_KINDS } from '../../harness/workloads.ts';

const BASELINE = path.join('results', 'gate', 'baseline.json');

interface GateFlags {
  baseline: string;
  writeBaseline: boolean;
  rates?: number[];
  workload?: WorkloadKind;
  durationS?: number;
  parallel?: number;
  url?: string;
  out?: string;
  confirm: boolean;
  maxSlipP99Ms?: number;
}


export function registerGateCommand(program: Command): void {
  program
    .command('gate')
    .description('CI load gate: mock runner + admission, open loop at two rates, compared with the committed baseline (exit 0 pass, 1 regression, 2 invalid run)')
    .option('--baseline <file>', 'baseline to compare with (or to write)', BASELINE)
    .option('--write-baseline', "measure with the gate's default configuration and write --baseline instead of comparing", false)
    .option('--rates <list>', 'with --write-baseline: offered rates, req/s (default 3,9)', (v) => v.split(',').map(positive))
    .option('--workload <kind>', `with --write-baseline: the request mix, one of ${WORKLOAD_KINDS.join(', ')} (default chat; *-natural: outputs end at EOS)`, oneOf(WORKLOAD_KINDS))
    .option('--duration-s <s>', "seconds of arrivals per rate (default: the baseline's; tests shorten it)", positive)
    .option('--parallel <n>', "the server's sequence slots (default: the baseline's; a test breaks the scheduler with 1)", positiveInt)
    .option('--url <url>', 'drive this server instead of starting one per rate')
    .option('--out <dir>', 'result folder (default results/runs/gate-<time>)')
    .option('--max-slip-p99-ms <ms>', "the generator is behind its schedule (an invalid run) above this slip p99 (default: the baseline's; tests on a loaded machine raise it)", positive)
    .option('--no-confirm', 'judge one run only (default: a rate that regressed is measured again, and the regression stands only if that run regresses too)')
    .action(async (f: GateFlags) => {
      process.exitCode = await gate(f);
    });
}

async function gate(f: GateFlags): Promise<number> {
  const { DEFAULT_THRESHOLDS, confirmVerdict, invalidReasons, judge, regressedRates, renderVerdict } = await import('../../harness/gate/judge.ts');
  const { DEFAULT_GATE_CONFIG, runGate } = await import('../../harness/gate/run.ts');
  const { readBaseline, writeBaseline } = await import('../../harness/gate/baseline.ts');
  const log = (line: string): void => void process.stderr.write(line + '\n');
  let baseline;
  try {
    baseline = f.writeBaseline ? null : readBaseline(f.baseline);
  } catch (err) {
    log(`gate: INVALID (exit 2): cannot read the baseline: ${(err as Error).message}`);
    return 2;
  }
  const config = {
    ...(baseline?.config ?? DEFAULT_GATE_CONFIG),
    ...(f.writeBaseline && f.rates !== undefined ? { rates: f.rates } : {}),
    ...(f.writeBaseline && f.workload !== undefined ? { workload: f.workload } : {}),
    ...(f.durationS === undefined ? {} : { durationS: f.durationS }),
    ...(f.parallel === undefined ? {} : { parallel: f.parallel }),
    ...(f.maxSlipP99Ms === undefined ? {} : { maxSlipP99Ms: f.maxSlipP99Ms }),
  };
  const thresholds = baseline?.thresholds ?? DEFAULT_THRESHOLDS;
  const out = f.out ?? path.join('results', 'runs', `gate-${new Date().toISOString().replace(/[:.]/g, '-')}`);
  const t0 = performance.now();
  const run = await runGate(config, out, { ...(f.url === undefined ? {} : { url: f.url }), log });
  const seconds = (performance.now() - t0) / 1000;
  for (const p of run.problems) log(`gate: ${p}`);

  if (f.writeBaseline) {
    const bad = run.measurements.flatMap((m) => invalidReasons(m, thresholds.minArrivals).map((r) => `${m.rate} req/s: ${r}`));
    if (run.problems.length > 0 || bad.length > 0 || run.measurements.length !== config.rates.length) {
      log(`gate: not writing a baseline from an invalid run:\n  - ${[...run.problems, ...bad].join('\n  - ')}`);
      return 2;
    }
    const command = `node bin/headroom.mjs gate --write-baseline --rates ${config.rates.join(',')} --workload ${config.workload} --baseline ${f.baseline}${f.out === undefined ? '' : ` --out ${f.out}`}`;
    await writeBaseline(f.baseline, config, thresholds, run.measurements, command);
    log(`gate: wrote ${f.baseline} in ${seconds.toFixed(0)} s`);
    return 0;
  }

  let verdict = judge(run.measurements, baseline?.rates ?? [], thresholds);
  const again = regressedRates(verdict);
  if (f.confirm && again.length > 0) {
    // The same arrivals as the first run (and the baseline): what differs between the two runs is the machine.
    log(`gate: ${again.join(', ')} req/s regressed; measuring ${again.length === 1 ? 'it' : 'them'} once more to confirm`);
    const confirmation = await runGate({ ...config, rates: again }, path.join(out, 'confirm'), { ...(f.url === undefined ? {} : { url: f.url }), log, seedOf: (rate) => config.seed + config.rates.indexOf(rate) });
    for (const p of confirmation.problems) log(`gate: confirmation: ${p}`);
    verdict = confirmVerdict(verdict, confirmation.measurements, thresholds);
  }
  const text = `${renderVerdict(verdict, thresholds)}\n${run.problems.map((p) => `  - ${p}\n`).join('')}gate: ${config.rates.length} rates x ${config.durationS} s in ${seconds.toFixed(0)} s; records in ${out}\n`;
  process.stdout.write(text);
  await mkdir(out, { recursive: true });
  await writeFile(path.join(out, 'gate.json'), JSON.stringify({ baseline: f.baseline, config, thresholds, seconds, problems: run.problems, verdict }, null, 2) + '\n');
  await writeFile(path.join(out, 'gate.md'), text);
  return verdict.exitCode;
}
