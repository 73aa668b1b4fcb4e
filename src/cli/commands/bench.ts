// `headroom bench`: run (open or closed loop), report (any SLO, from raw records), stub (a
// model-free server to validate the harness), validate (the harness's own validation suite).
// Only light modules are imported at the top: the harness (DuckDB) and the progress bar are
// imported inside each action, so `--help` stays fast.
import type { Command } from 'commander';
import { InvalidArgumentError, Option } from 'commander';
import { existsSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { BenchConfig } from '../../harness/run.ts';
import type { Progress } from '../../harness/generator.ts';
import { DEFAULT_STUB, startStubServer } from '../../harness/stub-server.ts';
import { UserError } from '../user-error.ts';
import type { WorkloadKind } from '../../harness/workloads.ts';
import { WORKLOAD_KINDS } from '../../harness/workloads.ts';

const num = (v: string): number => {
  const n = Number(v);
  if (v.trim() === '' || !Number.isFinite(n)) throw new InvalidArgumentError(`expected a number, got '${v}'`);
  return n;
};
const int = (v: string): number => {
  const n = num(v);
  if (!Number.isInteger(n)) throw new InvalidArgumentError(`expected an integer, got '${v}'`);
  return n;
};
/** `--header 'name: value'`, repeatable: collected into one object. */
const header = (v: string, previous: Record<string, string>): Record<string, string> => {
  const i = v.indexOf(':');
  const name = i < 0 ? '' : v.slice(0, i).trim();
  if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name)) throw new InvalidArgumentError(`expected 'name: value', got '${v}'`);
  return { ...previous, [name.toLowerCase()]: v.slice(i + 1).trim() };
};
const numList = (v: string): number[] => v.split(/[,:]/).map(num);

interface RunFlags {
  url: string;
  path: string;
  model?: string;
  loop: 'open' | 'closed';
  arrival: 'poisson' | 'gamma' | 'fixed';
  rate: number;
  gammaShape: number;
  concurrency: number;
  durationS: number;
  warmupS: number;
  cooldownS: number;
  timeoutS: number;
  seed: number;
  workload: WorkloadKind;
  eosTokenId?: number;
  vocabSize?: number;
  naturalMeanTokens?: number;
  tokensPerWord: number;
  contextTokens: number;
  mix: number[];
  promptTokens: number;
  outputTokens: number;
  sloHeaderMs?: number;
  ignoreEos: boolean;
  maxSlipP99Ms: number;
  out?: string;
  slo: number;
  report?: string | true;
  json: boolean;
  progress: boolean;
  apiKey?: string;
  header: Record<string, string>;
}

export function registerBenchCommands(program: Command): void {
  const bench = program.command('bench').description('Load generator, reports and harness validation');

  bench
    .command('run')
    .description('Drive a server over HTTP (open loop by default) and store per-request records')
    .requiredOption('--url <url>', 'base URL of an OpenAI-compatible server')
    .option('--path <path>', 'chat-completions path', '/v1/chat/completions')
    .option('--model <name>', 'model name to send (default: first of GET /v1/models)')
    .addOption(new Option('--loop <kind>', 'open: scheduled arrivals; closed: N workers (calibration)').choices(['open', 'closed']).default('open'))
    .addOption(new Option('--arrival <kind>', 'open-loop arrival process').choices(['poisson', 'gamma', 'fixed']).default('poisson'))
    .option('--rate <rps>', 'open loop: mean arrivals per second', num, 1)
    .option('--gamma-shape <k>', 'gamma arrivals: shape (1 = Poisson, < 1 burstier)', num, 1)
    .option('--concurrency <n>', 'closed loop: workers', int, 1)
    .option('--duration-s <s>', 'arrivals are generated over this many seconds', num, 60)
    .option('--warmup-s <s>', 'arrivals before this are flagged warmup', num, 0)
    .option('--cooldown-s <s>', 'arrivals in the last s seconds are flagged cooldown', num, 0)
    .option('--timeout-s <s>', 'client timeout; timed-out rows are censored', num, 300)
    .option('--seed <n>', 'seed for arrivals and workload', int, 0)
    .addOption(new Option('--workload <kind>', 'request mix (*-natural: lengths end at EOS, docs/bench.md)').choices(WORKLOAD_KINDS).default('chat'))
    .option('--eos-token-id <id>', 'natural-length workloads: the EOS token to bias (default: probed from the target)', int)
    .option('--vocab-size <n>', 'natural-length workloads: vocabulary size (default: probed from the target)', int)
    .option('--natural-mean-tokens <n>', "natural-length workloads: mean output length (default: the workload's)", num)
    .option('--tokens-per-word <r>', 'measured tokens per generated word on the target tokenizer', num, 1)
    .option('--context-tokens <n>', 'model context; mixed-size inputs are scaled to fit (0 = none)', int, 0)
    .option('--mix <s:m:l>', 'mixed workload weights short:medium:long', numList, [1, 1, 1])
    .option('--prompt-tokens <n>', 'uniform workload: prompt tokens', int, 256)
    .option('--output-tokens <n>', 'uniform and mixed workloads: max_tokens', int, 128)
    .option('--slo-header-ms <ms>', 'send x-slo-ms with every request', num)
    .option('--no-ignore-eos', 'do not send ignore_eos: true')
    .option('--max-slip-p99-ms <ms>', 'mark the run invalid above this scheduling slip p99', num, 5)
    .option('--out <dir>', 'result folder (default results/runs/<time>-<workload>-<loop>)')
    .option('--slo <ms>', 'E2E SLO for the summary printed after the run', num, 4000)
    .option('--report [file]', 'also write one HTML page with figures at --slo (default <out>/report.html)')
    .option('--json', 'print the summary as JSON', false)
    .option('--no-progress', 'no progress bar')
    .option('--api-key <key>', 'send Authorization: Bearer <key> with every request')
    .addOption(new Option('--header <name:value>', 'send this header with every request (repeatable)').argParser(header).default({}, 'none'))
    .action(async (f: RunFlags) => {
      const mix = f.mix;
      if (mix.length !== 3) throw new UserError(`--mix: expected three weights s:m:l, got ${mix.join(':')}`);
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
        mix: [mix[0] ?? 1, mix[1] ?? 1, mix[2] ?? 1],
        promptTokens: f.promptTokens,
        outputTokens: f.outputTokens,
        sloHeaderMs: f.sloHeaderMs ?? null,
        ignoreEos: f.ignoreEos,
        maxSlipP99Ms: f.maxSlipP99Ms,
        headers: { ...f.header, ...(f.apiKey === undefined ? {} : { authorization: `Bearer ${f.apiKey}` }) },
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

  bench
    .command('report')
    .description('Recompute throughput, goodput and latencies from raw records at any SLO')
    .argument('<dirs...>', 'result folders written by bench run')
    .option('--slo <ms>', 'E2E SLO in ms', num, 4000)
    .option('--slo-grid <list>', 'SLOs for the sensitivity table (default 0.5x..2x of --slo)', numList)
    .option('--json', 'JSON summary (vLLM bench-serve key names)', false)
    .action(async (dirs: string[], f: { slo: number; sloGrid?: number[]; json: boolean }) => {
      const missing = dirs.find((d) => !existsSync(path.join(d, 'meta.json')));
      if (missing !== undefined) throw new UserError(`${missing}: not a result folder (no meta.json; bench run writes one)`);
      for (const dir of dirs) await printReport(dir, f.slo, f.sloGrid ?? null, f.json);
    });

  bench
    .command('stub')
    .description('Serve a model-free, sleep-based OpenAI-compatible stub (for validating the harness)')
    .option('--port <n>', 'port (0 = any)', int, 8199)
    .option('--host <h>', 'host', DEFAULT_STUB.host)
    .option('--slots <n>', 'concurrent requests in service (0 = unlimited)', int, DEFAULT_STUB.slots)
    .option('--ttft-ms <ms>', 'sleep before the first token', num, DEFAULT_STUB.ttftMs)
    .option('--token-ms <ms>', 'sleep between tokens', num, DEFAULT_STUB.tokenMs)
    .option('--max-output-tokens <n>', 'cap on streamed tokens', int, DEFAULT_STUB.maxOutputTokens)
    .option('--queue-limit <n>', 'shed with 503 beyond this many waiting (-1 = never)', int, DEFAULT_STUB.queueLimit)
    .option('--retry-after-s <s>', 'Retry-After on 503', num, DEFAULT_STUB.retryAfterS)
    .action(async (f: { port: number; host: string; slots: number; ttftMs: number; tokenMs: number; maxOutputTokens: number; queueLimit: number; retryAfterS: number }) => {
      const h = await startStubServer(f);
      process.stdout.write(`stub listening on ${h.url}\n`);
      const stop = (): void => {
        void h.close().then(() => process.exit(0));
      };
      process.once('SIGINT', stop);
      process.once('SIGTERM', stop);
    });

  bench
    .command('validate')
    .description("The harness's own validation: KS over seeds, stub below capacity, stub at 2x capacity")
    .option('--out <dir>', 'where to write the validation results (the committed record is results/validation)', path.join('results', 'runs', 'validation'))
    .option('--quick', 'short runs (minutes -> seconds) for a smoke check', false)
    .action(async (f: { out: string; quick: boolean }) => {
      const { runValidation } = await import('../../harness/validate.ts');
      const { toJson } = await import('../../harness/format.ts');
      const summary = await runValidation(f.out, f.quick);
      process.stdout.write(toJson(summary) + '\n');
      if (!summary.all_pass) process.exitCode = 1;
    });

  bench
    .command('max-rate')
    .description("Measure the generator's own ceiling: open-loop slip at a ladder of rates against the stub")
    .option('--rates <list>', 'rates to try, rps', numList, [200, 500, 1000, 2000, 3000, 4000])
    .option('--duration-s <s>', 'seconds per run', num, 10)
    .option('--repeats <n>', 'interleaved repeats', int, 3)
    .option('--slip-bound-ms <ms>', 'sustained means median slip p99 below this', num, 5)
    .option('--stub-ttft-ms <ms>', 'stub service time', num, 5)
    .option('--out <file>', 'write the result JSON here')
    .action(async (f: { rates: number[]; durationS: number; repeats: number; slipBoundMs: number; stubTtftMs: number; out?: string }) => {
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
