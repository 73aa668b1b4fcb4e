// The fixed probe: a short greedy generation sent to the idle engine before every run, timed. The
// same request every time (prompt, max_tokens, temperature 0, ignore_eos), so its latency changes
// only when the machine (or the engine's fixed costs) does: a thermal or contention drift across
// a multi-hour sweep shows up as a drift in this column, on every row, instead of being guessed.
//
// It is sent as an operator with `x-headroom-bypass-admission: 1` (src/api/auth.ts,
// docs/api.md): rung 5 must not refuse it, and a probe that admission could refuse would measure
// the controller, not the machine. It runs before the bench run, so it never competes with load.
import { request } from 'undici';

/** The probe request: fixed forever; changing it breaks comparability with every stored row. */
export const PROBE_BODY = {
  messages: [{ role: 'user', content: 'Count from one to twenty, one number per line.' }],
  max_tokens: 16,
  temperature: 0,
  ignore_eos: true,
  stream: false,
} as const;

/** How many times the probe is sent; the first warms the path, the median of the rest is stored. */
export const PROBE_REPEATS = 3;

export interface ProbeResult {
  /** Median latency of the timed repeats, ms (null when every repeat failed). */
  probeMs: number | null;
  /** Every repeat's latency, ms, warm-up first (NaN for a failed repeat). */
  allMs: number[];
  /** Why a repeat failed (HTTP status and message), else null. */
  error: string | null;
}

/** Sends the probe `PROBE_REPEATS` times to `url` as `model`, authenticated with `operatorKey`. */
export async function runProbe(url: string, model: string, operatorKey: string): Promise<ProbeResult> {
  const allMs: number[] = [];
  let error: string | null = null;
  for (let i = 0; i < PROBE_REPEATS; i++) {
    const t0 = performance.now();
    try {
      const res = await request(new URL('/v1/chat/completions', url), {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${operatorKey}`, 'x-headroom-bypass-admission': '1' },
        body: JSON.stringify({ model, ...PROBE_BODY }),
        headersTimeout: 60_000,
        bodyTimeout: 60_000,
      });
      const text = await res.body.text();
      if (res.statusCode !== 200) {
        error = `probe: HTTP ${res.statusCode}: ${text.slice(0, 160)}`;
        allMs.push(NaN);
        continue;
      }
      allMs.push(performance.now() - t0);
    } catch (err) {
      error = `probe: ${(err as Error).message}`;
      allMs.push(NaN);
    }
  }
  const timed = allMs.slice(1).filter((v) => Number.isFinite(v)).sort((a, b) => a - b);
  const probeMs = timed.length === 0 ? null : (timed[(timed.length - 1) >> 1]! + timed[timed.length >> 1]!) / 2;
  return { probeMs, allMs, error };
}
