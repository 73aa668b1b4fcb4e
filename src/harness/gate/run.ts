// One CI load-gate run: for each rate, a fresh `headroom serve --runner mock` with the admission
// control a user gets (no artifact, no traces: it learns from its own outcomes), one open-loop run through the
// harness (runBench: schedule, records, generator validation), the server stopped; then the
// steady-window numbers the verdict reads (judge.ts). It talks to the server over HTTP only.
//
// Why the mock runner at a fixed speed: its step time is the cost model's number, waited with a
// timer, not computed, so the gate measures the scheduler's and admission's decisions rather than
// how fast (or how shared) the CI machine is. What is left of the machine is the JS around each
// step (HTTP, SSE, the step loop), a small share of a step at speed 1 (docs/ci-gate.md).
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import type { BenchConfig } from '../run.ts';
import type { WorkloadKind } from '../workloads.ts';
import { runBench, unreachable } from '../run.ts';
import { summarize } from '../report.ts';
import type { GeneratorValidation } from '../run.ts';
import type { RateMeasurement } from './judge.ts';
import type { ServeChild } from '../serve-child.ts';
import { startServe } from '../serve-child.ts';

/** Everything that decides what the gate measures; the baseline records it and a run reuses it. */
export interface GateConfig {
  /** Offered rates, req/s: one below saturation, one well above (results/gate/capacity.md). */
  readonly rates: readonly number[];
  /** Seconds of arrivals per rate. */
  readonly durationS: number;
  /** Arrivals in the first seconds are flagged warm-up and not counted. */
  readonly warmupS: number;
  readonly seed: number;
  /** A natural-length workload (chat-natural) learns the mock's EOS over HTTP (eos-probe.ts). */
  readonly workload: WorkloadKind;
  /** Tokens per generated word, as the admission collection used it. */
  readonly tokensPerWord: number;
  /** The E2E SLO: the server's default budget and the goodput threshold, ms. */
  readonly sloMs: number;
  /** Client timeout, s; a timed-out request counts at +Infinity in the p99. */
  readonly timeoutS: number;
  /** The generator is behind its schedule above this slip p99, ms. */
  readonly maxSlipP99Ms: number;
  /** Mock runner cost multiplier (1: the default cost model). */
  readonly mockSpeed: number;
  /** Sequence slots (the running batch's limit). */
  readonly parallel: number;
  /**
   * An offline admission artifact and warm-start traces, relative to the repository root; null
   * (the gate's default): the shipped admission, learned by the server from its own outcomes.
   */
  readonly admissionArtifact: string | null;
  readonly admissionCalibrationTraces: string | null;
}

export const DEFAULT_GATE_CONFIG: GateConfig = {
  rates: [3, 9],
  durationS: 90,
  warmupS: 5,
  seed: 15,
  workload: 'chat',
  tokensPerWord: 1.15,
  sloMs: 2000,
  timeoutS: 10,
  maxSlipP99Ms: 20,
  mockSpeed: 1,
  parallel: 16,
  admissionArtifact: null,
  admissionCalibrationTraces: null,
};

/** The `headroom serve` flags the gate starts its server with. */
export function serveArgs(c: GateConfig): string[] {
  return [
    'serve', '--runner', 'mock', '--mock-speed', String(c.mockSpeed), '--host', '127.0.0.1', '--port', '0',
    '--parallel', String(c.parallel), '--slo-ms', String(c.sloMs), '--scheduler', 'continuous', '--kv', 'paged', '--prefix-cache', 'on',
    // Port 0 keeps no admission state: every rate starts cold, as a first `npm start` does.
    '--admission', 'conformal', ...artifactArgs(c),
  ];
}

/** An offline artifact's flags (relative to the repository root, the server's working directory, so no machine path is recorded). */
function artifactArgs(c: GateConfig): string[] {
  if (c.admissionArtifact === null) return [];
  return [
    '--admission-artifact', c.admissionArtifact,
    ...(c.admissionCalibrationTraces === null ? [] : ['--admission-calibration-traces', c.admissionCalibrationTraces]),
    // The artifact names the machine it was fitted on; the mock's step times are the cost model's,
    // not the CPU's, so it holds on any machine (the server warns, once).
    '--admission-allow-mismatch',
  ];
}

export interface GateRunResult {
  readonly measurements: RateMeasurement[];
  /** Problems outside the per-rate numbers (server would not start, target unreachable). */
  readonly problems: string[];
}

async function startServer(c: GateConfig, logFile: string): Promise<ServeChild> {
  return startServe(serveArgs(c), logFile);
}

function benchConfig(c: GateConfig, url: string, rate: number, seed: number): BenchConfig {
  return {
    url, path: '/v1/chat/completions', model: null, loop: 'open', arrival: 'poisson', rate, gammaShape: 1, concurrency: 1,
    durationS: c.durationS, warmupS: c.warmupS, cooldownS: 0, timeoutS: c.timeoutS, seed, workload: c.workload,
    tokensPerWord: c.tokensPerWord, contextTokens: 0, mix: [1, 1, 1], promptTokens: 256, outputTokens: 128,
    sloHeaderMs: null, ignoreEos: true, maxSlipP99Ms: c.maxSlipP99Ms,
  };
}

/**
 * Runs every rate of `c` into `outDir/rate-<r>/` (the i-th rate with seed c.seed + i, unless `seedOf` says otherwise). With `url`, drives that server instead of
 * starting one per rate (the server's flags are then whatever it was started with).
 */
export async function runGate(c: GateConfig, outDir: string, opts: { url?: string; log?: (line: string) => void; seedOf?: (rate: number, index: number) => number } = {}): Promise<GateRunResult> {
  const log = opts.log ?? (() => {});
  const measurements: RateMeasurement[] = [];
  const problems: string[] = [];
  for (const [i, rate] of c.rates.entries()) {
    const dir = path.join(outDir, `rate-${rate}`);
    await mkdir(dir, { recursive: true });
    let server: ServeChild | null = null;
    try {
      if (opts.url === undefined) server = await startServer(c, path.join(dir, 'server.log'));
      const cfg = benchConfig(c, opts.url ?? server?.url ?? '', rate, opts.seedOf?.(rate, i) ?? c.seed + i);
      const down = await unreachable(cfg);
      if (down !== null) {
        problems.push(`${rate} req/s: ${down}`);
        continue;
      }
      log(`gate: ${rate} req/s for ${c.durationS} s against ${cfg.url}`);
      let diedAt: number | null = null;
      void server?.exited.then(() => (diedAt ??= Date.now()));
      const res = await runBench(cfg, dir);
      if (diedAt !== null) problems.push(`${rate} req/s: the server exited during the run`);
      const s = summarize(res.records, { sloMs: c.sloMs, windowS: c.durationS - c.warmupS, timeoutMs: c.timeoutS * 1000 });
      const gv = res.meta['generator_validation'] as GeneratorValidation;
      measurements.push({
        rate,
        numArrivals: s.num_arrivals,
        numCompleted: s.completed,
        numShed: s.num_shed,
        numTransportErrors: s.num_transport_errors,
        goodputRps: s.request_goodput,
        p99E2eMs: s.p99_e2el_ms,
        generatorValid: gv.valid,
        generatorInvalidReason: gv.invalid_reason,
      });
    } catch (err) {
      problems.push(`${rate} req/s: ${(err as Error).message}`);
    } finally {
      await server?.stop();
    }
  }
  return { measurements, problems };
}
