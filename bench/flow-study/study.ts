// The flow-control calibration study (issue 14), end to end: starts the replicas, runs every
// point through a fresh gateway, writes the evidence files, analysis.json and report.md into --out.
// What each stage does and why: src/harness/flow-study/study.ts; how to run it: docs/flow-control.md
// ("Calibration study").
//
//   node --import tsx bench/flow-study/study.ts --out <dir> [--runner llama|mock] [--replicas 2] ...
//
// Defaults are the real study's on the tiny model (2 replicas, 1 llama thread each); a mock-runner
// smoke run passes --runner mock and short durations (results/flow-study/mock-smoke/README.md).
import { parseArgs } from 'node:util';
import type { StudyPhase } from '../../src/harness/flow-study/points.ts';
import { runStudy } from '../../src/harness/flow-study/study.ts';
import { killAll } from '../../src/harness/flow-study/topology.ts';

const { values } = parseArgs({
  options: {
    out: { type: 'string' },
    runner: { type: 'string', default: 'llama' },
    model: { type: 'string' },
    replicas: { type: 'string', default: '2' },
    'replica-flags': { type: 'string', default: '--threads 1 --parallel 16 --ctx 8192' },
    phases: { type: 'string', default: 'request-sweep,mixed,open-noisy' },
    'request-caps': { type: 'string', default: '4,8,16,24,32,48' },
    concurrency: { type: 'string', default: '64' },
    'mixed-concurrency': { type: 'string', default: '48' },
    'token-levels': { type: 'string', default: '0.8,1.0,1.2' },
    repeats: { type: 'string', default: '3' },
    tolerance: { type: 'string', default: '0.05' },
    'open-rate-shares': { type: 'string', default: '0.8,1.2' },
    'gamma-shape': { type: 'string', default: '0.25' },
    'duration-s': { type: 'string', default: '60' },
    'warmup-s': { type: 'string', default: '10' },
    'cooldown-s': { type: 'string', default: '5' },
    'timeout-s': { type: 'string', default: '120' },
    'tokens-per-word': { type: 'string', default: '1.15' },
    'context-tokens': { type: 'string', default: '2048' },
    mix: { type: 'string', default: '1:1:1' },
    'prompt-tokens': { type: 'string', default: '256' },
    'output-tokens': { type: 'string', default: '128' },
    'flow-queue-size': { type: 'string', default: '256' },
    'flow-queue-ttl-ms': { type: 'string', default: '5000' },
    'sample-interval-ms': { type: 'string', default: '500' },
    'min-rows-for-p95': { type: 'string', default: '20' },
    'max-slip-p99-ms': { type: 'string', default: '25' },
    seed: { type: 'string', default: '42' },
    quiet: { type: 'boolean', default: false },
  },
});

const need = (ok: boolean, what: string, got: unknown): void => {
  if (!ok) {
    process.stderr.write(`flow-study: expected ${what}, got ${String(got)}\n`);
    process.exit(1);
  }
};
const num = (k: keyof typeof values): number => Number(values[k]);
const list = (k: keyof typeof values): number[] => String(values[k]).split(/[,:]/).map(Number);
const PHASES: readonly StudyPhase[] = ['request-sweep', 'mixed', 'open-noisy'];
const phases = String(values.phases).split(',') as StudyPhase[];
need(values.out !== undefined, '--out <dir>', values.out);
need(values.runner === 'llama' || values.runner === 'mock', '--runner llama|mock', values.runner);
need(phases.every((p) => PHASES.includes(p)), `--phases from ${PHASES.join(',')}`, values.phases);
const caps = list('request-caps');
need(caps.length > 0 && caps.every((c) => Number.isInteger(c) && c > 0), '--request-caps positive integers', values['request-caps']);
const mix = list('mix');
need(mix.length === 3, '--mix s:m:l', values.mix);
need(num('duration-s') > num('warmup-s') + num('cooldown-s'), 'warmup + cooldown < duration', values['duration-s']);

// Interrupted: stop the replicas and the gateway too (the study's own `finally` does not run).
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.once(sig, () => {
    killAll();
    process.stderr.write(`flow-study: ${sig}; stopped the replicas and the gateway; the files hold the points finished so far\n`);
    process.exit(130);
  });
}

const t0 = Date.now();
const state = await runStudy({
  outDir: values.out!,
  runner: values.runner as 'llama' | 'mock',
  model: values.model ?? null,
  replicas: num('replicas'),
  replicaFlags: String(values['replica-flags']).split(/\s+/).filter((s) => s !== ''),
  phases,
  requestCaps: caps,
  concurrency: num('concurrency'),
  mixedConcurrency: num('mixed-concurrency'),
  tokenLevels: list('token-levels'),
  repeats: num('repeats'),
  toleranceShare: num('tolerance'),
  openRateShares: list('open-rate-shares'),
  seed: num('seed'),
  env: {
    durationS: num('duration-s'), warmupS: num('warmup-s'), cooldownS: num('cooldown-s'), timeoutS: num('timeout-s'),
    tokensPerWord: num('tokens-per-word'), contextTokens: num('context-tokens'), mix: [mix[0]!, mix[1]!, mix[2]!],
    promptTokens: num('prompt-tokens'), outputTokens: num('output-tokens'), gammaShape: num('gamma-shape'),
    flowQueueSize: num('flow-queue-size'), flowQueueTtlMs: num('flow-queue-ttl-ms'), sampleIntervalMs: num('sample-interval-ms'),
    minRowsForP95: num('min-rows-for-p95'), maxSlipP99Ms: num('max-slip-p99-ms'),
  },
  command: ['node --import tsx bench/flow-study/study.ts', ...process.argv.slice(2).map((a) => (/[\s"']/.test(a) ? `'${a}'` : a))].join(' '),
  log: values.quiet ? () => {} : (line) => process.stderr.write(`[flow-study +${((Date.now() - t0) / 1000).toFixed(0)}s] ${line}\n`),
});
process.stderr.write(`flow-study: ${state.summaries.length} points in ${((Date.now() - t0) / 1000).toFixed(0)} s; files in ${values.out!}\n`);
