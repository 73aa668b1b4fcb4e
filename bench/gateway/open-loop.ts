// The request loop the gateway benchmarks share (overhead.ts, steady.ts): streaming chat
// completions to the stub's model at `rate` per second, open loop (arrival i is due at start +
// i/rate, late or not), `total` of them through `pool`. A 200 response's TTFT runs from its intended
// send time to the first body chunk holding `data:`, so a client or proxy that falls behind pays
// for it; any other status, or a failed request, is an error.
import type { Pool } from 'undici';

const BODY = JSON.stringify({ model: 'stub-model', stream: true, max_tokens: 4, messages: [{ role: 'user', content: 'How far is the river from the stone?' }] });

/** Runs the loop; `ttft(i, ms)` for each request i that answered 200; resolves with the number of errors. */
export async function openLoop(pool: Pool, rate: number, total: number, ttft: (i: number, ms: number) => void): Promise<number> {
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
        inflight.push(one(i, t0 + (i * 1000) / rate));
      }
      if (next < total) setImmediate(tick);
      else done();
    };
    tick();
  });
  await Promise.all(inflight);
  return errors;
}
