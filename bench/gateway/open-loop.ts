// The request loop the gateway benchmarks share (overhead.ts, steady.ts): streaming chat
// completions to the stub's model at `rate` per second, open loop (arrival i is due at start +
// i/rate, late or not), `total` of them through `pool`. A 200 response's TTFT runs from its intended
// send time to the first body chunk holding `data:`, so a client or proxy that falls behind pays
// for it; any other status, or a failed request, is an error.
//
// How the loop waits for the next arrival: `spin` (the default) checks again at once
// (setImmediate), sending each arrival within microseconds of its time but holding a whole core;
// `sleep` waits on a timer (Node's timers fire a millisecond or so late), so arrivals go out up to
// ~1 ms late — counted in every arm's TTFT alike, since TTFT runs from the intended time — and the
// client leaves the machine's other cores to the servers it measures. `slips` gets each
// arrival's lateness (actual send − intended, ms).
import type { Pool } from 'undici';

const BODY = JSON.stringify({ model: 'stub-model', stream: true, max_tokens: 4, messages: [{ role: 'user', content: 'How far is the river from the stone?' }] });

/** Runs the loop; `ttft(i, ms)` for each request i that answered 200; resolves with the number of errors. */
export async function openLoop(pool: Pool, rate: number, total: number, ttft: (i: number, ms: number) => void, wait: 'spin' | 'sleep' = 'spin', slips: number[] | null = null): Promise<number> {
  const t0 = performance.now() + 20;
  const inflight: Promise<void>[] = [];
  let errors = 0;
  let next = 0;
  const one = async (i: number, intended: number): Promise<void> => {
    try {
      const res = await pool.request({ path: '/v1/chat/completions', method: 'POST', headers: { 'content-type': 'application/json' }, body: BODY });
      let first = true;
      for await (const chunk of res.body) {
        if (first && (chunk as Buffer).includes('data:')) {
          first = false;
          if (res.statusCode === 200) ttft(i, performance.now() - intended);
        }
      }
      if (res.statusCode !== 200) errors++;
    } catch {
      errors++;
    }
  };
  await new Promise<void>((done) => {
    const tick = (): void => {
      const now = performance.now();
      while (next < total && t0 + (next * 1000) / rate <= now) {
        const i = next++;
        const intended = t0 + (i * 1000) / rate;
        slips?.push(performance.now() - intended);
        inflight.push(one(i, intended));
      }
      if (next >= total) done();
      else if (wait === 'spin') setImmediate(tick);
      else setTimeout(tick, Math.max(0, t0 + (next * 1000) / rate - performance.now()));
    };
    tick();
  });
  await Promise.all(inflight);
  return errors;
}
