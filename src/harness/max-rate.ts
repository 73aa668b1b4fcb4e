// How fast can the generator itself go? Open-loop Poisson ladders against the stub (its own
// process, unlimited slots, so the server never queues), repeated and interleaved; for each rate
// the scheduling slip p50/p99 over repeats. The sustained rate is the highest whose median
// slip p99 stays under the bound and whose every request completed.
import { arrivalTimesMs } from './arrivals.ts';
import { runOpenLoop } from './generator.ts';
import { spawnStub } from './stub-process.ts';
import { quantileSorted, sortedCopy } from './stats.ts';
import type { RequestSpec } from './workloads.ts';
import { machineProbe, sourceInfo } from './provenance.ts';

export interface MaxRateOptions {
  readonly ratesPerS: readonly number[];
  readonly durationS: number;
  readonly repeats: number;
  readonly slipBoundMs: number;
  readonly stubTtftMs: number;
}

export interface RateRow {
  rate: number;
  slip_p50_ms: number[];
  slip_p99_ms: number[];
  ok_fraction: number[];
  median_slip_p50_ms: number;
  median_slip_p99_ms: number;
}

export async function measureMaxRate(o: MaxRateOptions, log: (s: string) => void): Promise<Record<string, unknown>> {
  const stub = await spawnStub({ slots: 0, ttftMs: o.stubTtftMs, maxOutputTokens: 1 });
  const spec: RequestSpec = { klass: 'uniform', prefixId: null, messages: [{ role: 'user', content: 'the of and to in is it you that he was for on are as with' }], promptTokensEst: 16, maxTokens: 1 };
  const rows = new Map<number, RateRow>(o.ratesPerS.map((r) => [r, { rate: r, slip_p50_ms: [], slip_p99_ms: [], ok_fraction: [], median_slip_p50_ms: NaN, median_slip_p99_ms: NaN }]));
  try {
    for (let rep = 0; rep < o.repeats; rep++) {
      // Rotate the order each repeat so slow drift of the machine does not land on one rate.
      const order = o.ratesPerS.map((_, i) => o.ratesPerS[(i + rep) % o.ratesPerS.length] ?? 0);
      for (const rate of order) {
        const arrivalsMs = arrivalTimesMs({ kind: 'poisson', ratePerS: rate, durationS: o.durationS, gammaShape: 1, seed: rep });
        const recs = await runOpenLoop({
          client: { origin: stub.url, path: '/v1/chat/completions', model: 'stub', timeoutMs: 30_000, sloHeaderMs: null, ignoreEos: true },
          arrivalsMs,
          specs: Array.from({ length: arrivalsMs.length }, () => spec),
          durationMs: o.durationS * 1000,
          warmupMs: 0,
          cooldownMs: 0,
        });
        const slip = sortedCopy(recs.map((r) => r.slip_ms));
        const row = rows.get(rate);
        if (row === undefined) throw new Error('measureMaxRate: bug: unknown rate');
        row.slip_p50_ms.push(quantileSorted(slip, 0.5));
        row.slip_p99_ms.push(quantileSorted(slip, 0.99));
        row.ok_fraction.push(recs.filter((r) => r.outcome === 'ok').length / recs.length);
        log(`rep ${rep} rate ${rate}: slip p50 ${quantileSorted(slip, 0.5).toFixed(3)} ms p99 ${quantileSorted(slip, 0.99).toFixed(3)} ms ok ${row.ok_fraction.at(-1)?.toFixed(4)}`);
      }
    }
  } finally {
    await stub.stop();
  }
  const table = [...rows.values()].map((r) => ({
    ...r,
    median_slip_p50_ms: quantileSorted(sortedCopy(r.slip_p50_ms), 0.5),
    median_slip_p99_ms: quantileSorted(sortedCopy(r.slip_p99_ms), 0.5),
  }));
  const sustained = table.filter((r) => r.median_slip_p99_ms < o.slipBoundMs && Math.min(...r.ok_fraction) === 1).map((r) => r.rate);
  return {
    options: o,
    max_sustained_rate: sustained.length > 0 ? Math.max(...sustained) : null,
    table,
    source: sourceInfo(),
    machine: machineProbe(),
  };
}
