// Near the open-file limit: under `ulimit -n 256`, a flood of 1,000 idle connections (and more
// arriving) neither crashes the server nor starves it of descriptors: /health keeps answering
// throughout, work past the bound is refused with 503, and it is served again once the flood ends. (Before: ~1,000 idle
// sockets under a 1,024 limit made every new client, /health included, get a connection reset.)
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { connect } from 'node:net';
import type { Socket } from 'node:net';
import { test } from 'node:test';
import { request } from 'undici';

const FD_LIMIT = 256;
const FLOOD = 1000;

test(`under ulimit -n ${FD_LIMIT}, ${FLOOD}+ idle connections leave /health answering and work refused with 503`, async () => {
  const cmd = `ulimit -n ${FD_LIMIT} && exec "${process.execPath}" bin/headroom.mjs serve --runner mock --host 127.0.0.1 --port 0 --headers-timeout-ms 20000 --request-timeout-ms 20000`;
  const proc = spawn('bash', ['-c', cmd], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  proc.stdout.on('data', (b: Buffer) => (out += b.toString()));
  proc.stderr.on('data', (b: Buffer) => (out += b.toString()));
  const sockets: Socket[] = [];
  try {
    const url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no start: ${out}`)), 30_000);
      proc.stdout.on('data', () => {
        const m = /serving .* on (http:\/\/[\d.:]+)/.exec(out);
        if (m) {
          clearTimeout(timer);
          resolve(m[1]!);
        }
      });
    });
    const { port, hostname } = new URL(url);
    const stats0 = (await (await request(`${url}/stats`)).body.json()) as { connections: { softLimit: number; hardLimit: number } };
    assert.ok(stats0.connections.hardLimit <= FD_LIMIT - 64, `hard bound ${stats0.connections.hardLimit} is not below the fd limit`);
    let resets = 0;
    const flood = (n: number): void => {
      for (let i = 0; i < n; i++) {
        const s = connect(Number(port), hostname);
        s.on('error', () => resets++);
        s.on('connect', () => s.write('POST /v1/completions HTTP/1.1\r\nHost: x\r\n'));
        sockets.push(s);
      }
    };
    for (let i = 0; i < FLOOD; i += 50) {
      flood(50);
      await new Promise((r) => setTimeout(r, 10));
    }
    await new Promise((r) => setTimeout(r, 200));
    // Probes are answered, each within 2 s, while the flood goes on and holds every normal slot.
    const more = setInterval(() => flood(20), 50);
    try {
      for (let i = 0; i < 10; i++) {
        const r = await request(`${url}/health`, { reset: true, headersTimeout: 2000 });
        assert.equal(r.statusCode, 200);
        await r.body.dump();
      }
    } finally {
      clearInterval(more);
    }
    const work = await request(`${url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'headroom-mock', prompt: 'hi', max_tokens: 2 }), reset: true, headersTimeout: 2000 });
    assert.equal(work.statusCode, 503);
    assert.equal(((await work.body.json()) as { error: { code: string } }).error.code, 'too_many_connections');
    for (const s of sockets) s.destroy();
    await new Promise((r) => setTimeout(r, 300));
    const ok = await request(`${url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'headroom-mock', prompt: 'hi', max_tokens: 2 }), reset: true });
    assert.equal(ok.statusCode, 200);
    await ok.body.dump();
    const stats = (await (await request(`${url}/stats`)).body.json()) as { connections: { numEvicted: number } };
    console.log(`# fd limit ${FD_LIMIT}: bounds ${stats0.connections.softLimit}/${stats0.connections.hardLimit}, ${stats.connections.numEvicted} flood sockets evicted, ${resets} saw an error`);
    assert.equal(proc.exitCode, null, `the server exited: ${out}`);
  } finally {
    for (const s of sockets) s.destroy();
    proc.kill('SIGKILL');
  }
});
