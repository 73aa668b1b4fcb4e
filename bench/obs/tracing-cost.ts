// What OpenTelemetry tracing costs in inter-token latency: the same load against a Headroom server
// process with tracing off and on (exporting to a local OTLP/HTTP sink), runs interleaved and the
// order rotated, a fresh server per run. The mock runner's default cost model stands in for a
// small model (2 ms per step + 0.05 ms per prompt token + 0.5 ms per decoding sequence), so a step
// costs what the tiny model's does and the difference is the exporter, not the machine's mood.
// ITL is measured at the client, from SSE event arrival times. Prints numbers; gates on nothing.
//
//   node --import tsx bench/obs/tracing-cost.ts [--pairs 3] [--seconds 8] [--clients 16] [--max-tokens 64]

import type { ChildProcess } from 'node:child_process';
import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const { values } = parseArgs({
  options: {
    pairs: { type: 'string', default: '3' },
    seconds: { type: 'string', default: '8' },
    clients: { type: 'string', default: '16' },
    'max-tokens': { type: 'string', default: '64' },
  },
});
const numPairs = Number(values.pairs);
const seconds = Number(values.seconds);
const numClients = Number(values.clients);
const maxTokens = Number(values['max-tokens']);
const bin = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'bin', 'headroom.mjs');

type Config = 'off' | 'on';
interface RunResult {
  readonly config: Config;
  readonly itlMs: number[];
  readonly numRequests: number;
  readonly numSpansExported: number;
}

/** An OTLP/HTTP sink: reads and counts, answers 200. */
async function startSink(): Promise<{ url: string; spans: () => number; close(): Promise<void> }> {
  let spans = 0;
  const srv = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      spans += (Buffer.concat(chunks).toString('utf8').match(/"spanId"/g) ?? []).length;
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(srv.address() as AddressInfo).port}`, spans: () => spans, close: () => new Promise<void>((r) => srv.close(() => r())) };
}

async function startServer(otel: string | null): Promise<{ url: string; child: ChildProcess }> {
  const args = [bin, 'serve', '--runner', 'mock', '--host', '127.0.0.1', '--port', '0', '--parallel', '32', '--scheduler', 'continuous', ...(otel === null ? [] : ['--otel-endpoint', otel])];
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  const url = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
      const m = / on (http:\/\/\S+)/.exec(out);
      if (m !== null) resolve(m[1]!);
    });
    child.once('exit', (code) => reject(new Error(`server exited (${code}) before listening: ${out}`)));
  });
  return { url, child };
}

/** One streaming request; pushes the gaps between consecutive SSE events (ms). */
async function stream(url: string, i: number, itl: number[]): Promise<void> {
  const res = await fetch(`${url}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'headroom-mock', prompt: `tracing cost request ${i} with a prompt of modest length`, max_tokens: maxTokens, stream: true }),
  });
  if (res.body === null || res.status !== 200) throw new Error(`status ${res.status}`);
  const dec = new TextDecoder();
  let last: number | null = null;
  for await (const chunk of res.body) {
    const now = performance.now();
    const numEvents = (dec.decode(chunk as Uint8Array, { stream: true }).match(/^data: \{/gm) ?? []).length;
    for (let k = 0; k < numEvents; k++) {
      if (last !== null) itl.push(k === 0 ? now - last : 0);
      last = now;
    }
  }
}

async function run(config: Config, sink: { url: string; spans: () => number }): Promise<RunResult> {
  const spansBefore = sink.spans();
  const { url, child } = await startServer(config === 'on' ? sink.url : null);
  const itl: number[] = [];
  let numRequests = 0;
  const deadline = performance.now() + seconds * 1000;
  const warmUntil = performance.now() + 1000;
  await Promise.all(
    Array.from({ length: numClients }, async (_, c) => {
      for (let i = 0; performance.now() < deadline; i++) {
        const sink: number[] = [];
        await stream(url, c * 100_000 + i, sink);
        if (performance.now() > warmUntil) {
          itl.push(...sink);
          numRequests++;
        }
      }
    }),
  );
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  child.kill('SIGTERM'); // drains, flushes buffered spans, exits
  await exited;
  return { config, itlMs: itl, numRequests, numSpansExported: sink.spans() - spansBefore };
}

const quantile = (xs: readonly number[], q: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))] ?? NaN;
};
const median = (xs: readonly number[]): number => quantile(xs, 0.5);
const f = (x: number): string => x.toFixed(3);

const sink = await startSink();
const results: RunResult[] = [];
for (let p = 0; p < numPairs; p++) {
  const order: Config[] = p % 2 === 0 ? ['off', 'on'] : ['on', 'off'];
  for (const config of order) {
    const r = await run(config, sink);
    results.push(r);
    console.log(`pair ${p + 1} tracing ${r.config.padEnd(3)}: ${r.numRequests} requests, ${r.itlMs.length} gaps, ITL median ${f(median(r.itlMs))} ms, p99 ${f(quantile(r.itlMs, 0.99))} ms, spans exported ${r.numSpansExported}`);
  }
}
await sink.close();

console.log(`\n${numPairs} interleaved pairs, ${numClients} streaming clients, ${maxTokens} tokens each, ${seconds} s per run (first second dropped)`);
for (const config of ['off', 'on'] as const) {
  const rs = results.filter((r) => r.config === config);
  const med = rs.map((r) => median(r.itlMs));
  const p99 = rs.map((r) => quantile(r.itlMs, 0.99));
  console.log(`tracing ${config.padEnd(3)}: ITL median ${f(median(med))} ms [${f(Math.min(...med))}, ${f(Math.max(...med))}]  p99 ${f(median(p99))} ms [${f(Math.min(...p99))}, ${f(Math.max(...p99))}]`);
}
const ratios = Array.from({ length: numPairs }, (_, p) => {
  const pair = results.slice(2 * p, 2 * p + 2);
  const on = pair.find((r) => r.config === 'on')!;
  const off = pair.find((r) => r.config === 'off')!;
  return { med: median(on.itlMs) / median(off.itlMs), p99: quantile(on.itlMs, 0.99) / quantile(off.itlMs, 0.99) };
});
console.log(`on/off per pair: median ITL ×${ratios.map((r) => r.med.toFixed(3)).join(', ×')}; p99 ITL ×${ratios.map((r) => r.p99.toFixed(3)).join(', ×')}`);
