// Fuzzing the front door: over 10,000 generated malformed requests (random JSON shapes, wrong
// types, huge and negative numbers, deep nesting, long strings, invalid UTF-8, lone surrogates,
// NUL bytes, slow bodies, abrupt disconnects, header floods, pipelined and HTTP/1.0 requests),
// each answered 4xx or closed cleanly, never a 5xx; the server never restarts (it is this
// process), and afterwards the engine is at its idle baseline: nothing waiting or running, every
// KV block and sequence id free (prefix cache off, so nothing is legitimately held), invariants hold.
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { after, before, test } from 'node:test';
import { Pool, request } from 'undici';
import type { TestServer } from '../helpers/headroom.ts';
import { startTestServer, waitForIdle } from '../helpers/headroom.ts';
import type { JsonCase, RawCase } from '../helpers/fuzz-cases.ts';
import { jsonCases, rawCases, slowBodyCase } from '../helpers/fuzz-cases.ts';

const NUM_JSON = 8000;
const NUM_RAW = 2500;
const NUM_SLOW = 16;
const CONCURRENCY = 24;
const REQUEST_TIMEOUT_MS = 1500;

let server: TestServer;
let port: number;

before(async () => {
  server = await startTestServer({
    mock: { contextTokens: 2048, cost: { speed: 0.2 } },
    server: { bodyLimitBytes: 256 * 1024, headersTimeoutMs: 1000, requestTimeoutMs: REQUEST_TIMEOUT_MS, keepAliveTimeoutMs: 1000, maxConnections: 1024, maxConnectionsPerAddress: 1024 },
    scheduler: { scheduler: 'continuous', prefixCache: false },
  });
  port = Number(new URL(server.url).port);
});
after(() => server.close());

/** Runs `work` over `items` with at most `n` at once. */
async function pool<T>(items: readonly T[], n: number, work: (item: T, i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(Array.from({ length: n }, async () => {
    while (next < items.length) {
      const i = next++;
      await work(items[i]!, i);
    }
  }));
}

const STATUS = /HTTP\/1\.[01] (\d{3}) /g;

/** One raw case on a fresh socket: the statuses the server sent, and whether it closed the socket. */
function runRaw(c: RawCase): Promise<{ statuses: number[]; closedByServer: boolean; text: string }> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1');
    let text = '';
    let closedByUs = false;
    const giveUp = setTimeout(() => {
      closedByUs = true;
      s.destroy();
    }, 10_000);
    s.on('data', (d) => (text += d.toString('latin1')));
    s.on('error', () => undefined);
    s.on('close', () => {
      clearTimeout(giveUp);
      resolve({ statuses: [...text.matchAll(STATUS)].map((m) => Number(m[1])), closedByServer: !closedByUs, text });
    });
    s.on('connect', () => {
      void (async () => {
        for (const chunk of c.chunks) {
          if (s.destroyed) return;
          s.write(chunk);
          if (c.gapMs > 0) await new Promise((r) => setTimeout(r, c.gapMs));
        }
        if (c.expect === 'hangup') {
          await new Promise((r) => setTimeout(r, Math.random() * 20));
          closedByUs = true;
          s.destroy();
        }
      })();
    });
  });
}

test(`${NUM_JSON + NUM_RAW + NUM_SLOW} malformed requests: each 4xx or closed cleanly, and the engine ends at its idle baseline`, async () => {
  const t0 = performance.now();
  const json = jsonCases(NUM_JSON, 42);
  const raws = rawCases(NUM_RAW, 43);
  const failures: string[] = [];
  const counts = new Map<string, number>();
  const count = (k: string): void => void counts.set(k, (counts.get(k) ?? 0) + 1);

  // Slow bodies run in the background the whole time: each must get 408 at the request timeout.
  const slow = Promise.all(Array.from({ length: NUM_SLOW }, async () => {
    const r = await runRaw(slowBodyCase());
    count(`slow body ${r.statuses.join(',')}`);
    if (r.statuses.length !== 1 || r.statuses[0] !== 408 || !r.closedByServer) failures.push(`slow body: ${r.text.slice(0, 120)}`);
  }));

  const dispatcher = new Pool(server.url, { connections: CONCURRENCY });
  try {
    await pool(json, CONCURRENCY, async (c: JsonCase, i) => {
      try {
        const res = await request(`${server.url}${c.path}`, { method: 'POST', dispatcher, headers: { 'content-type': 'application/json', ...c.headers }, body: c.body });
        const text = await res.body.text();
        count(`json ${res.statusCode}`);
        if (res.statusCode < 400 || res.statusCode >= 500) failures.push(`json #${i} ${c.path} -> ${res.statusCode}: ${c.body.subarray(0, 160).toString()} => ${text.slice(0, 160)}`);
        else if (!/^\{"error":\{"message":/.test(text)) failures.push(`json #${i}: not an OpenAI error: ${text.slice(0, 160)}`);
      } catch (e) {
        failures.push(`json #${i}: client error ${(e as Error).message}`);
      }
    });
  } finally {
    await dispatcher.close();
  }
  const jsonS = (performance.now() - t0) / 1000;
  await pool(raws, CONCURRENCY, async (c, i) => {
    const r = await runRaw(c);
    count(`raw ${c.name}`);
    if (c.expect === 'hangup') {
      if (r.statuses.some((s) => s >= 500)) failures.push(`raw #${i} ${c.name}: ${r.statuses.join(',')}`);
      return;
    }
    if (r.statuses.length === 0 || r.statuses.some((s) => s < 400 || s >= 500) || !r.closedByServer) {
      failures.push(`raw #${i} ${c.name}: statuses [${r.statuses.join(',')}], closed by server ${r.closedByServer}: ${JSON.stringify(r.text.slice(0, 200))}`);
    }
  });
  await slow;
  const elapsedS = (performance.now() - t0) / 1000;
  console.log(`# fuzz phases: json ${jsonS.toFixed(1)} s, all ${elapsedS.toFixed(1)} s`);

  const kinds = new Map<string, number>();
  for (const f of failures) kinds.set(f.replace(/#\d+/, '').slice(0, 40), (kinds.get(f.replace(/#\d+/, '').slice(0, 40)) ?? 0) + 1);
  assert.deepEqual(failures.slice(0, 10), [], `${failures.length} failures: ${JSON.stringify([...kinds])}`);
  // The same process is still serving, and the engine is back at its idle baseline.
  const health = await request(`${server.url}/health`);
  assert.equal(health.statusCode, 200);
  await health.body.dump();
  await waitForIdle(server.headroom, 10_000);
  const stats = (await (await request(`${server.url}/stats`)).body.json()) as { engine: { scheduler: { numWaiting: number; numRunning: number; numFreeSeqIds: number; maxSequences: number; kv: { numBlocks: number; numFreeBlocks: number } } } };
  const s = stats.engine.scheduler;
  assert.equal(s.numWaiting, 0);
  assert.equal(s.numRunning, 0);
  assert.equal(s.kv.numFreeBlocks, s.kv.numBlocks, 'KV blocks leaked');
  assert.equal(s.numFreeSeqIds, s.maxSequences, 'sequence ids leaked');
  server.headroom.engine.scheduler.checkInvariants();
  const ok = await request(`${server.url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'headroom-mock', prompt: 'hi', max_tokens: 2 }) });
  assert.equal(ok.statusCode, 200);
  await ok.body.dump();
  console.log(`# fuzz: ${NUM_JSON + NUM_RAW + NUM_SLOW} cases in ${elapsedS.toFixed(1)} s; ${[...counts].map(([k, v]) => `${k}: ${v}`).join(', ')}`);
});
