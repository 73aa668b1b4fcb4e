// The demo's quick capacity probe: how many chat requests per second the unmanaged engine answers
// on this machine, right now, so that the overload is a multiple of what it can serve rather than a
// number measured on another CPU (a fast laptop would serve a fixed 3.2 req/s without a queue, and
// the demo would show nothing; a loaded one would drown both engines).
//
// Method: a closed loop of PROBE_CLIENTS clients on the admission-off engine (harness/generator.ts
// runClosedLoop, the chat workload of the demo's seed, its own stream of requests) for PROBE_S
// seconds; capacity = requests completed after the first WARMUP_S seconds (the first wave, which
// all started together, is still in prefill then) over the rest of the probe. Eight clients keep
// the batch deep enough that the engine is busy every step, yet answer within seconds on the tiny
// model. It is a rough number (about 20–30 completions): the demo only needs it to be past
// saturation by a clear margin, which OVERLOAD (2x) gives. The managed engine gets no probe load.
import { runClosedLoop } from '../harness/generator.ts';
import type { RequestRecord } from '../harness/record.ts';
import type { RequestSpec } from '../harness/workloads.ts';

export const PROBE_S = 20;
export const WARMUP_S = 5;
export const PROBE_CLIENTS = 8;
/** The demo's default rate is this multiple of the probe's capacity. */
export const OVERLOAD = 2;

export interface ProbeTarget {
  readonly origin: string;
  readonly model: string;
  readonly timeoutMs: number;
  readonly nextSpec: () => RequestSpec;
}

/** Requests answered per second, from a probe's records: completions ending in [fromMs, toMs) over that span. */
export function capacityRps(records: readonly RequestRecord[], fromMs: number, toMs: number): number {
  if (!(toMs > fromMs)) throw new Error(`capacityRps: expected toMs > fromMs, got ${fromMs}..${toMs}`);
  const n = records.filter((r) => r.outcome === 'ok' && r.end_ms >= fromMs && r.end_ms < toMs).length;
  return (n * 1000) / (toMs - fromMs);
}

/** Runs the probe and returns the capacity in req/s (0 when nothing completed). Requests still running at the end are cut. */
export async function probeCapacity(t: ProbeTarget): Promise<number> {
  const ac = new AbortController();
  const cut = setTimeout(() => ac.abort(), PROBE_S * 1000);
  const records = await runClosedLoop({
    client: { origin: t.origin, path: '/v1/chat/completions', model: t.model, timeoutMs: t.timeoutMs, sloHeaderMs: null, ignoreEos: true },
    concurrency: PROBE_CLIENTS,
    durationMs: PROBE_S * 1000,
    warmupMs: WARMUP_S * 1000,
    cooldownMs: 0,
    nextSpec: t.nextSpec,
    signal: ac.signal,
  }).finally(() => clearTimeout(cut));
  return capacityRps(records, WARMUP_S * 1000, PROBE_S * 1000);
}
