// `headroom bench`: run (open or closed loop), report (any SLO, from raw records), stub (a
// model-free server to validate the harness), validate (the harness's own validation suite),
// max-rate (the generator's own ceiling). Their options are declared in bench-options.ts.
// Only light modules are imported at the top: the harness (DuckDB) and the progress bar are
// imported inside each action, so `--help` stays fast.
import type { Command } from 'commander';
import { existsSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { BenchConfig } from '../../harness/run.ts';
import type { Progress } from '../../harness/generator.ts';
import { startStubServer } from '../../harness/stub-server.ts';
import { addOptions, readOptions } from '../option-table.ts';
import { UserError } from '../user-error.ts';
import { BENCH_MAX_RATE_OPTIONS, BENCH_REPORT_OPTIONS, BENCH_RUN_OPTIONS, BENCH_STUB_OPTIONS, BENCH_VALIDATE_OPTIONS } from './bench-options.ts';

export function registerBenchCommands(program: Command): void {
  const bench = program.command('bench').description('Load generator, reports and harness validation');

  const run = bench.command('run').description('Drive a server over HTTP (open loop by default) and store per-request records');
  addOptions(run, BENCH_RUN_OPTIONS, 'on-parse').action(async (_flags: unknown, c: Command) => {
    const f = readOptions(c, BENCH_RUN_OPTIONS);
    const { resolveModel, runBench, unreachable, validateConfig, withEos } = await import('../../harness/run.ts');
    const { default: cliProgress } = await import('cli-progress');
    const cfg: BenchConfig = {
      url: f.url,
      path: f.path,
      model: f.model ?? null,
      loop: f.loop,
      arrival: f.arrival,
      rate: f.rate,
      gammaShape: f.gammaShape,
      concurrency: f.concurrency,
      durationS: f.durationS,
      warmupS: f.warmupS,
      cooldownS: f.cooldownS,
      timeoutS: f.timeoutS,
      seed: f.seed,
      workload: f.workload,
      tokensPerWord: f.tokensPerWord,
      contextTokens: f.contextTokens,
      mix: f.mix,
      promptTokens: f.promptTokens,
      outputTokens: f.outputTokens,
      sloHeaderMs: f.sloHeaderMs ?? null,
      ignoreEos: f.ignoreEos,
      maxSlipP99Ms: f.maxSlipP99Ms,
      headers: { ...Object.fromEntries(f.header), ...(f.apiKey === undefined ? {} : { authorization: `Bearer ${f.apiKey}` }) },
      ...(f.eosTokenId === undefined || f.vocabSize === undefined ? {} : { eos: { eosTokenId: f.eosTokenId, vocabSize: f.vocabSize } }),
      ...(f.naturalMeanTokens === undefined ? {} : { naturalMeanTokens: f.naturalMeanTokens }),
    };
    if ((f.eosTokenId === undefined) !== (f.vocabSize === undefined)) throw new UserError('--eos-token-id and --vocab-size: expected both or neither');
    try {
      validateConfig(cfg);
    } catch (err) {
      throw new UserError((err as Error).message);
    }
    const problem = await unreachable(cfg);
    if (problem !== null) throw new UserError(problem);
    const ready = await withEos(cfg, await resolveModel(cfg));
    if (typeof ready === 'string') throw new UserError(ready);
    const stamp = new Date().toISOString().replace(/[:.]/g, '-');
    const dir = f.out ?? path.join('results', 'runs', `${stamp}-${f.workload}-${f.loop}`);
    const progress: Progress = { numSent: 0, numDone: 0, numPlanned: 0 };
    const showBar = f.progress && !f.json && process.stderr.isTTY;
    const bar = showBar
      ? new cliProgress.SingleBar(
          { format: `${f.loop} loop {bar} {value}/{total} done | sent {sent} | in flight {inflight}`, stream: process.stderr, hideCursor: true },
          cliProgress.Presets.shades_classic,
        )
      : null;
    bar?.start(1, 0, { sent: 0, inflight: 0 });
    const timer = bar
      ? setInterval(() => {
          bar.setTotal(Math.max(progress.numPlanned, progress.numSent, 1));
          bar.update(progress.numDone, { sent: progress.numSent, inflight: progress.numSent - progress.numDone });
        }, 500)
      : null;
    let result;
    try {
      result = await runBench(ready, dir, progress);
    } finally {
      if (timer) clearInterval(timer);
      bar?.stop();
    }
    await printReport(dir, f.slo, null, f.json);
    if (f.report !== undefined) {
      const { writeRunReport } = await import('../../harness/run-report/write.ts');
      const file = await writeRunReport(dir, f.slo, f.report === true ? undefined : f.report);
      process.stderr.write(`report in ${file}\n`);
    }
    process.stderr.write(`results in ${result.dir}\n`);
  });

  const report = bench.command('report').description('Recompute throughput, goodput and latencies from raw records at any SLO').argument('<dirs...>', 'result folders written by bench run');
  addOptions(report, BENCH_REPORT_OPTIONS, 'on-parse').action(async (dirs: string[], _flags: unknown, c: Command) => {
    const f = readOptions(c, BENCH_REPORT_OPTIONS);
    const missing = dirs.find((d) => !existsSync(path.join(d, 'meta.json')));
    if (missing !== undefined) throw new UserError(`${missing}: not a result folder (no meta.json; bench run writes one)`);
    for (const dir of dirs) await printReport(dir, f.slo, f.sloGrid ?? null, f.json);
  });

  const stub = bench.command('stub').description('Serve a model-free, sleep-based OpenAI-compatible stub (for validating the harness)');
  addOptions(stub, BENCH_STUB_OPTIONS, 'on-parse').action(async (_flags: unknown, c: Command) => {
    const f = readOptions(c, BENCH_STUB_OPTIONS);
    const h = await startStubServer(f);
    process.stdout.write(`stub listening on ${h.url}\n`);
    const stop = (): void => {
      void h.close().then(() => process.exit(0));
    };
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  });

  const validate = bench.command('validate').description("The harness's own validation: KS over seeds, stub below capacity, stub at 2x capacity");
  addOptions(validate, BENCH_VALIDATE_OPTIONS, 'on-parse').action(async (_flags: unknown, c: Command) => {
    const f = readOptions(c, BENCH_VALIDATE_OPTIONS);
    const { runValidation } = await import('../../harness/validate.ts');
    const { toJson } = await import('../../harness/format.ts');
    const summary = await runValidation(f.out, f.quick);
    process.stdout.write(toJson(summary) + '\n');
    if (!summary.all_pass) process.exitCode = 1;
  });

  const maxRate = bench.command('max-rate').description("Measure the generator's own ceiling: open-loop slip at a ladder of rates against the stub");
  addOptions(maxRate, BENCH_MAX_RATE_OPTIONS, 'on-parse').action(async (_flags: unknown, c: Command) => {
    const f = readOptions(c, BENCH_MAX_RATE_OPTIONS);
    const { measureMaxRate } = await import('../../harness/max-rate.ts');
    const { toJson } = await import('../../harness/format.ts');
    const res = await measureMaxRate(
      { ratesPerS: f.rates, durationS: f.durationS, repeats: f.repeats, slipBoundMs: f.slipBoundMs, stubTtftMs: f.stubTtftMs },
      (line) => process.stderr.write(line + '\n'),
    );
    const text = toJson({ command: `node bin/headroom.mjs bench max-rate ${process.argv.slice(4).join(' ')}`, ...res });
    if (f.out !== undefined) {
      await mkdir(path.dirname(f.out), { recursive: true });
      await writeFile(f.out, text + '\n');
    }
    process.stdout.write(text + '\n');
  });
}

async function printReport(dir: string, sloMs: number, grid: number[] | null, json: boolean): Promise<void> {
  const { loadRun } = await import('../../harness/run-report/load.ts');
  const { renderReport, toJson } = await import('../../harness/format.ts');
  const run = await loadRun(dir, sloMs, grid);
  if (json) {
    const { generatorValidation: gv, loopNote, summary, classes, sensitivity } = run;
    process.stdout.write(toJson({ dir, loop_note: loopNote, generator_validation: gv, ...summary, loop: run.meta['loop'], per_class: classes, slo_sensitivity: sensitivity }) + '\n');
    return;
  }
  process.stdout.write(renderReport(dir, run.loopNote, run.summary, run.classes, run.sensitivity, run.validity) + '\n');
}
