// What a ladder study is: every setting that decides what its numbers mean. It is written to the
// study's plan.json before anything runs, and a resumed study must be started with the same one
// (a half-study measured under two configurations is two half-studies).
import type { BenchConfig } from '../run.ts';
import type { WorkloadKind } from '../workloads.ts';
import type { EosTarget } from '../natural-length.ts';

export interface LadderConfig {
  /** Model runner of every server ('mock': the cost model, for tests and smoke runs). */
  readonly runner: 'llama' | 'mock';
  /** GGUF path relative to the repository root (llama), or null for the server's default. */
  readonly model: string | null;
  /** llama.cpp threads. */
  readonly threads: number;
  /** Mock runner cost multiplier. */
  readonly mockSpeed: number;
  /** Sequence slots (the running batch's limit), and the calibration's closed-loop workers. */
  readonly parallel: number;
  /** What every request asks for (src/harness/workloads.ts); a natural-length one ends at EOS. */
  readonly workload: WorkloadKind;
  /** Largest max_tokens the servers accept (the chat workload clips to 512). */
  readonly maxOutputTokens: number;
  /** Rung ids in ladder order (plan.ts RUNGS). */
  readonly rungs: readonly string[];
  /** Arrival/workload seeds; one block per (rate, seed). */
  readonly seeds: readonly number[];
  /** Offered rates, req/s; null: from the closed-loop calibration and `gridMultipliers`. */
  readonly rates: readonly number[] | null;
  /** Multiples of the calibrated capacity that make the rate grid. */
  readonly gridMultipliers: readonly number[];
  /** Seconds of closed-loop calibration. */
  readonly calibrationS: number;
  /** Seconds of arrivals per run (warm-up included). */
  readonly durationS: number;
  /** Arrivals in the first seconds are flagged warm-up and not counted. */
  readonly warmupS: number;
  /** Client timeout, s: a slower request is censored (counts at +Infinity in the p99). */
  readonly timeoutS: number;
  /** The E2E SLO for goodput and every server's default budget, ms. */
  readonly sloMs: number;
  /** Tokens per generated word on the served tokenizer (docs/benchmarks.md). */
  readonly tokensPerWord: number;
  /** The generator is behind its schedule above this slip p99, ms (the run is marked invalid). */
  readonly maxSlipP99Ms: number;
  /** Rung 5: an offline predictor artifact and warm-start traces (relative paths), or null: the shipped admission, learned online. */
  readonly admissionArtifact: string | null;
  readonly admissionCalibrationTraces: string | null;
}

/** The real ladder's defaults (docs/ladder.md); tests and the smoke study shorten them. */
export const DEFAULT_LADDER: LadderConfig = {
  runner: 'llama',
  model: null,
  threads: 2,
  mockSpeed: 1,
  parallel: 16,
  workload: 'chat',
  maxOutputTokens: 512,
  rungs: ['1-fifo', '2-static', '3-continuous', '4-paged-prefix', '5-admission-80', '5-admission-95', '5-admission-99'],
  seeds: [1, 2, 3],
  rates: null,
  // Five loads from a quarter of capacity to three times it: with 3 seeds and 8 runs per block,
  // 120 runs; at 120 s each this fits in about five hours on 2 cores (docs/ladder.md).
  gridMultipliers: [0.25, 0.5, 1, 2, 3],
  calibrationS: 60,
  durationS: 120,
  warmupS: 10,
  timeoutS: 20,
  sloMs: 4000,
  tokensPerWord: 1.15,
  maxSlipP99Ms: 20,
  admissionArtifact: null,
  admissionCalibrationTraces: null,
};

/** Throws "expected X, got Y" for the first setting that cannot make a study. */
export function validateLadderConfig(c: LadderConfig): void {
  const need = (ok: boolean, what: string, got: unknown): void => {
    if (!ok) throw new Error(`ladder: expected ${what}, got ${String(got)}`);
  };
  need(c.rungs.length > 0, 'at least one rung', c.rungs.join(','));
  need(new Set(c.rungs).size === c.rungs.length, 'distinct rungs', c.rungs.join(','));
  need(c.seeds.length > 0 && c.seeds.every((s) => Number.isInteger(s)), 'integer seeds', c.seeds.join(','));
  need(new Set(c.seeds).size === c.seeds.length, 'distinct seeds', c.seeds.join(','));
  need(c.rates === null || (c.rates.length > 0 && c.rates.every((r) => r > 0)), 'rates > 0', c.rates?.join(','));
  need(c.gridMultipliers.length > 0 && c.gridMultipliers.every((m) => m > 0), 'grid multipliers > 0', c.gridMultipliers.join(','));
  need(c.durationS > 0 && c.warmupS >= 0 && c.warmupS < c.durationS, 'warm-up < duration', `${c.warmupS} s of ${c.durationS} s`);
  need(c.calibrationS > 1, 'a calibration longer than 1 s', c.calibrationS);
  need(c.timeoutS > 0, 'a timeout > 0', c.timeoutS);
  need(c.sloMs > 0, 'an SLO > 0 ms', c.sloMs);
  need(Number.isInteger(c.parallel) && c.parallel > 0, 'a positive integer --parallel', c.parallel);
}

/** The harness config of one open-loop run of the study; `eos`: the served model's, for a natural-length workload (null otherwise). */
export function benchConfigFor(c: LadderConfig, url: string, rate: number, seed: number, headers: Readonly<Record<string, string>>, eos: EosTarget | null): BenchConfig {
  return {
    ...(eos === null ? {} : { eos }),
    url, path: '/v1/chat/completions', model: null, loop: 'open', arrival: 'poisson', rate, gammaShape: 1, concurrency: 1,
    durationS: c.durationS, warmupS: c.warmupS, cooldownS: 0, timeoutS: c.timeoutS, seed, workload: c.workload,
    tokensPerWord: c.tokensPerWord, contextTokens: 0, mix: [1, 1, 1], promptTokens: 256, outputTokens: 128,
    sloHeaderMs: null, ignoreEos: true, maxSlipP99Ms: c.maxSlipP99Ms, headers,
  };
}

/** The `headroom serve` flags of one run: the study's common flags, then the rung's own. */
export function serveArgsFor(c: LadderConfig, rungFlags: readonly string[], traceOut: string | null): string[] {
  const common = ['serve', '--runner', c.runner, '--host', '127.0.0.1', '--port', '0', '--parallel', String(c.parallel),
    '--max-output-tokens', String(c.maxOutputTokens), '--slo-ms', String(c.sloMs)];
  if (c.runner === 'mock') common.push('--mock-speed', String(c.mockSpeed));
  else common.push('--threads', String(c.threads), ...(c.model === null ? [] : ['--model', c.model]));
  const admission = rungFlags.includes('conformal');
  const extra: string[] = [];
  if (admission && c.admissionArtifact !== null) extra.push('--admission-artifact', c.admissionArtifact, '--admission-allow-mismatch');
  if (admission && c.admissionCalibrationTraces !== null) extra.push('--admission-calibration-traces', c.admissionCalibrationTraces);
  if (admission && traceOut !== null) extra.push('--trace-out', traceOut);
  return [...common, ...rungFlags, ...extra];
}
