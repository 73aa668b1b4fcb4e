// The harness's validation suite (`headroom bench validate`). Three claims, each with the number
// that supports it and the expectation it is judged against:
//   1. arrivals: over 200 seeds, intended gaps pass KS against Exp(λ) about 5% of the time at
//      α = 0.05, p-values are ~uniform (median ≈ 0.5), and arrivals per run are Poisson(λT);
//   2. below capacity, against the sleep stub in its own process, queueing is ~0 and per-second
//      send counts are Poisson (dispersion index ≈ 1);
//   3. at 2x the stub's capacity, median E2E grows across four successive windows (the open-loop
//      signature); a closed loop against the same stub stays flat, for contrast.
import { writeFile, mkdir } from 'node:fs/promises';
import path from 'node:path';
import { arrivalTimesMs, gapsOf } from './arrivals.ts';
import { ksExponential, mean, quantileSorted, sortedCopy, stdSample } from './stats.ts';
import type { BenchConfig } from './run.ts';
import { runBench } from './run.ts';
import { windowedMedianE2e } from './report.ts';
import { spawnStub } from './stub-process.ts';
import { machineProbe, sourceInfo } from './provenance.ts';

export interface KsRegime {
  rate: number;
  durationS: number;
}

export interface KsSeedsResult {
  rate: number;
  duration_s: number;
  num_seeds: number;
  rejection_rate: number;
  rejection_rate_expected: number;
  median_p: number;
  mean_arrivals: number;
  mean_arrivals_expected: number;
  sd_arrivals: number;
  sd_arrivals_expected: number;
  seed0_p: number;
  pass: boolean;
}

/** KS of intended gaps against Exp(λ) for seeds 0..numSeeds-1 in one regime. */
export function ksOverSeeds(regime: KsRegime, numSeeds: number): KsSeedsResult {
  const ps: number[] = [];
  const counts: number[] = [];
  for (let seed = 0; seed < numSeeds; seed++) {
    const t = arrivalTimesMs({ kind: 'poisson', ratePerS: regime.rate, durationS: regime.durationS, gammaShape: 1, seed });
    ps.push(ksExponential(gapsOf(t), regime.rate / 1000).pValue);
    counts.push(t.length);
  }
  const expected = regime.rate * regime.durationS;
  const rejection = ps.filter((p) => p < 0.05).length / numSeeds;
  const medianP = quantileSorted(sortedCopy(ps), 0.5);
  const m = mean(counts);
  const sd = stdSample(counts);
  // Bands: binomial 99% for the rejection rate; ±3 standard errors for the mean count; the sample
  // SD of n Poisson counts within ±25% of sqrt(λT); median p of 200 uniforms within 0.5 ± 0.12.
  const rejBand = 0.05 + 2.58 * Math.sqrt((0.05 * 0.95) / numSeeds);
  const pass =
    rejection <= rejBand &&
    Math.abs(medianP - 0.5) < 0.12 &&
    Math.abs(m - expected) < 3 * Math.sqrt(expected / numSeeds) &&
    Math.abs(sd / Math.sqrt(expected) - 1) < 0.25;
  return {
    rate: regime.rate,
    duration_s: regime.durationS,
    num_seeds: numSeeds,
    rejection_rate: rejection,
    rejection_rate_expected: 0.05,
    median_p: medianP,
    mean_arrivals: m,
    mean_arrivals_expected: expected,
    sd_arrivals: sd,
    sd_arrivals_expected: Math.sqrt(expected),
    seed0_p: ps[0] ?? NaN,
    pass,
  };
}

/** Index of dispersion of per-bin counts of `timesMs` over [0, durationMs), with a z-score. */
export function dispersion(timesMs: readonly number[], durationMs: number, binMs: number): { index: number; z: number; bins: number } {
  const bins = Math.floor(durationMs / binMs);
  const counts = new Array<number>(bins).fill(0);
  for (const t of timesMs) {
    const b = Math.floor(t / binMs);
    if (b >= 0 && b < bins) counts[b] = (counts[b] ?? 0) + 1;
  }
  const m = mean(counts);
  const v = stdSample(counts) ** 2;
  const index = v / m;
  // (bins - 1) * index ~ χ²(bins - 1) under Poisson; normal approximation for the z-score.
  const z = ((bins - 1) * index - (bins - 1)) / Math.sqrt(2 * (bins - 1));
  return { index, z, bins };
}

const baseConfig = (url: string): BenchConfig => ({
  url,
  path: '/v1/chat/completions',
  model: 'stub',
  loop: 'open',
  arrival: 'poisson',
  rate: 1,
  gammaShape: 1,
  concurrency: 1,
  durationS: 10,
  warmupS: 0,
  cooldownS: 0,
  timeoutS: 600,
  seed: 0,
  workload: 'uniform',
  tokensPerWord: 1,
  contextTokens: 0,
  mix: [1, 1, 1],
  promptTokens: 32,
  outputTokens: 1,
  sloHeaderMs: null,
  ignoreEos: true,
  maxSlipP99Ms: 5,
});

export async function runValidation(outDir: string, quick: boolean): Promise<{ all_pass: boolean } & Record<string, unknown>> {
  // 1. Arrival process over 200 seeds, in two regimes: the reference sweep's (1.4 rps, 180 s) and
  // the stub check's own.
  const numSeeds = 200;
  const ks = [ksOverSeeds({ rate: 1.4, durationS: 180 }, numSeeds), ksOverSeeds({ rate: 10, durationS: 60 }, numSeeds)];

  // 2. Below capacity: 4 slots x 100 ms = 40 rps capacity, offered 10 rps.
  const below = { slots: 4, ttftMs: 100, rate: 10, durationS: quick ? 10 : 60 };
  const stub1 = await spawnStub({ slots: below.slots, ttftMs: below.ttftMs, maxOutputTokens: 1 });
  let belowRes;
  try {
    belowRes = await runBench({ ...baseConfig(stub1.url), rate: below.rate, durationS: below.durationS, seed: 1 }, path.join(outDir, 'runs', 'below-capacity'));
  } finally {
    await stub1.stop();
  }
  const ok1 = belowRes.records.filter((r) => r.outcome === 'ok');
  // Server-side queueing: E2E from the actual send minus the service time. The generator's own
  // slip is reported beside it (generator_validation), not mixed into it.
  const queueing = sortedCopy(ok1.map((r) => (r.e2e_ms ?? 0) - r.slip_ms - below.ttftMs));
  const disp = dispersion(belowRes.records.map((r) => r.sent_ms), below.durationS * 1000, 1000);
  const expectedCount = below.rate * below.durationS;
  const belowSummary = {
    stub: `${below.slots} slots x ${below.ttftMs} ms = ${(below.slots * 1000) / below.ttftMs} rps capacity`,
    offered_rps: below.rate,
    duration_s: below.durationS,
    arrivals: belowRes.records.length,
    arrivals_expected: expectedCount,
    arrivals_sd_expected: Math.sqrt(expectedCount),
    completed: ok1.length,
    queueing_note: 'E2E from the actual send minus the 100 ms service time; generator slip is in generator_validation',
    queueing_p50_ms: quantileSorted(queueing, 0.5),
    queueing_p99_ms: quantileSorted(queueing, 0.99),
    dispersion_index_1s_bins: disp.index,
    dispersion_z: disp.z,
    generator_validation: belowRes.meta['generator_validation'],
  };
  const belowPass =
    ok1.length === belowRes.records.length &&
    belowSummary.queueing_p50_ms < 5 &&
    belowSummary.queueing_p99_ms < 50 &&
    Math.abs(belowRes.records.length - expectedCount) < 3 * Math.sqrt(expectedCount) &&
    Math.abs(disp.z) < 3;

  // 3. Overload: 1 slot x 100 ms = 10 rps capacity, offered 20 rps; four equal windows.
  const over = quick ? { ttftMs: 50, rate: 40, durationS: 8 } : { ttftMs: 100, rate: 20, durationS: 60 };
  const capacity = 1000 / over.ttftMs;
  const stub2 = await spawnStub({ slots: 1, ttftMs: over.ttftMs, maxOutputTokens: 1 });
  let overRes;
  let closedRes;
  try {
    overRes = await runBench({ ...baseConfig(stub2.url), rate: over.rate, durationS: over.durationS, seed: 2 }, path.join(outDir, 'runs', 'overload-open'));
    // Contrast: a closed loop of 4 workers against the same stub cannot build a queue past 4.
    closedRes = await runBench(
      { ...baseConfig(stub2.url), loop: 'closed', concurrency: 4, durationS: quick ? 4 : 20, seed: 3 },
      path.join(outDir, 'runs', 'overload-closed'),
    );
  } finally {
    await stub2.stop();
  }
  const windowMs = (over.durationS * 1000) / 4;
  const medians = windowedMedianE2e(overRes.records, 0, windowMs, 4);
  // Fluid approximation: by time t the backlog is (rate - capacity) t requests, which take
  // (rate/capacity - 1) t to drain, so a request arriving at t waits ≈ t (rate/capacity - 1).
  const expected = [0, 1, 2, 3].map((k) => (k + 0.5) * windowMs * (over.rate / capacity - 1) + over.ttftMs);
  const closedMs = (closedRes.meta['config'] as BenchConfig).durationS * 1000;
  const closedMedians = windowedMedianE2e(closedRes.records, 0, closedMs / 4, 4);
  const growing = medians.every((m, i) => i === 0 || m > (medians[i - 1] ?? Infinity));
  const overPass = growing && (medians[3] ?? 0) > 3 * (medians[0] ?? Infinity);
  const overloadSummary = {
    stub: `1 slot x ${over.ttftMs} ms = ${capacity} rps capacity`,
    offered_rps: over.rate,
    duration_s: over.durationS,
    arrivals: overRes.records.length,
    window_s: windowMs / 1000,
    median_e2e_ms_by_window: medians,
    median_e2e_ms_expected_fluid: expected,
    closed_loop_4_workers_median_e2e_ms_by_window: closedMedians,
    closed_loop_throughput_rps: closedRes.records.length / (closedMs / 1000),
    generator_validation: overRes.meta['generator_validation'],
  };

  const all = ks.every((k) => k.pass) && belowPass && overPass;
  const summary = {
    all_pass: all,
    command: `node bin/headroom.mjs bench validate --out ${outDir}${quick ? ' --quick' : ''}`,
    created_at: new Date().toISOString(),
    source: sourceInfo(),
    machine: machineProbe(),
    ks_over_seeds: ks,
    ks_note: 'λ is given, not fitted, so the plain one-sample KS null distribution is exact (no Lilliefors correction).',
    below_capacity: { ...belowSummary, pass: belowPass },
    overload: { ...overloadSummary, pass: overPass },
  };
  await mkdir(outDir, { recursive: true });
  await writeFile(path.join(outDir, 'validation.json'), JSON.stringify(summary, null, 2) + '\n');
  return summary;
}

