// Graceful drain on SIGTERM, against a real `headroom serve` process: /ready flips to 503 at
// once, a late arrival gets 503 + Retry-After, every in-flight stream finishes with its real
// finish_reason and full length, then the process exits 0.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { test } from 'node:test';
import { request } from 'undici';
import { streamCompletion } from '../helpers/sse.ts';
import type { StreamResult } from '../helpers/sse.ts';

const STREAMS = 8;
const MAX_TOKENS = 60;

for (const scheduler of ['fifo', 'continuous']) {
  test(`SIGTERM drains ${STREAMS} in-flight streams (${scheduler})`, async () => {
    const proc = spawn(process.execPath, ['bin/headroom.mjs', 'serve', '--runner', 'mock', '--host', '127.0.0.1', '--port', '0', '--scheduler', scheduler, '--mock-speed', '2'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    proc.stdout.on('data', (b: Buffer) => (out += b.toString()));
    proc.stderr.on('data', (b: Buffer) => (out += b.toString()));
    const exited = once(proc, 'exit');
    try {
      const url = await new Promise<string>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`server did not start: ${out}`)), 20_000);
        proc.stdout.on('data', () => {
          const m = /on (http:\/\/[\d.:]+)/.exec(out);
          if (m) {
            clearTimeout(timer);
            resolve(m[1]!);
          }
        });
      });
      assert.equal((await request(`${url}/ready`)).statusCode, 200);

      // Open the streams; count one as in flight once its first chunk (the role delta) arrived.
      let inFlight = 0;
      const results: Promise<StreamResult>[] = [];
      for (let i = 0; i < STREAMS; i++) {
        results.push(
          streamCompletion(url, { model: 'headroom-mock', messages: [{ role: 'user', content: `stream ${i}` }], max_tokens: MAX_TOKENS, ignore_eos: true, stream: true, stream_options: { include_usage: true } }, '/v1/chat/completions'),
        );
      }
      // Wait until the engine holds every stream, and none has finished yet.
      for (;;) {
        const stats = (await (await request(`${url}/stats`)).body.json()) as { engine: { numSubmitted: number; scheduler: { numWaiting: number; numRunning: number } } };
        inFlight = stats.engine.scheduler.numWaiting + stats.engine.scheduler.numRunning;
        if (stats.engine.numSubmitted === STREAMS) break;
        await new Promise((r) => setTimeout(r, 2));
      }
      assert.equal(inFlight, STREAMS, 'every stream must be in flight when the signal lands');

      // The first stream to end, for the ordering check below.
      let firstEndMs = Infinity;
      for (const r of results) void r.then(() => (firstEndMs = Math.min(firstEndMs, performance.now())), () => undefined);
      const killedAt = performance.now();
      proc.kill('SIGTERM');
      let readyFlippedMs = Infinity;
      for (;;) {
        const r = await request(`${url}/ready`);
        await r.body.dump();
        if (r.statusCode === 503) {
          readyFlippedMs = performance.now() - killedAt;
          break;
        }
        if (performance.now() - killedAt > 2000) break;
      }
      // At once means before the drain has done anything else: while every stream is still in flight
      // (an ordering, not a wall-clock bound, which a loaded machine broke at 160 ms against 100).
      assert.ok(killedAt + readyFlippedMs < firstEndMs, `/ready turned 503 ${readyFlippedMs.toFixed(1)} ms after SIGTERM, after a stream had already ended`);

      const late = await request(`${url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'headroom-mock', messages: [{ role: 'user', content: 'late' }], max_tokens: 5 }) });
      const lateBody = (await late.body.json()) as { error: { code: string } };
      assert.equal(late.statusCode, 503);
      assert.equal(lateBody.error.code, 'draining');
      assert.ok(Number(late.headers['retry-after']) >= 1, 'a refusal carries Retry-After');
      const health = await request(`${url}/health`);
      assert.equal(health.statusCode, 200, '/health stays 200 while draining');
      await health.body.dump();

      const done = await Promise.all(results);
      for (const [i, r] of done.entries()) {
        assert.equal(r.status, 200);
        assert.equal(r.finishReason, 'length', `stream ${i} ended without its real finish_reason`);
        assert.ok(r.sawDone, `stream ${i} was cut before [DONE]`);
        const usage = r.chunks.at(-1)?.usage as { completion_tokens: number } | undefined;
        assert.equal(usage?.completion_tokens, MAX_TOKENS, `stream ${i} was truncated`);
      }
      const [code] = (await exited) as [number | null];
      assert.equal(code, 0, `exit code ${code}; output: ${out}`);
    } finally {
      proc.kill('SIGKILL');
    }
  });
}
