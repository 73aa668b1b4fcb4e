// The burst benchmark: N concurrent connections (default 20,000) against Headroom in engine mode
// (a mock-runner `serve`) or gateway mode (a `gateway` in front of a mock-runner `serve`), under a
// small capacity bound and a short flow queue (run-burst.ts says what is measured). Writes
// report.json and prints a summary; exits 1 if a server died or did not return to idle.
//
//   node --import tsx bench/burst/burst.ts --mode engine|gateway [--connections 20000] [--clients N]
//     [--addresses 128] [--max-inflight-requests 32] [--flow-queue-size 64] [--flow-queue-ttl-ms 2000]
//     [--max-tokens 8] [--timeout-ms 120000] [--server-args='...'] [--fd-limit N] [--out results/burst/engine]
//
// --clients defaults to one client process per 5,000 connections (a process may hold at most
// `ulimit -n` sockets); --addresses spreads the connections over that many loopback source
// addresses (127.1.x.y), so no address passes the server's per-address bound (256 by default) and
// the burst meets its total connection bound, as a crowd of clients would.
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { runBurst } from './run-burst.ts';
import type { BurstReport } from './run-burst.ts';
import { startTarget } from './servers.ts';

const { values } = parseArgs({
  options: {
    mode: { type: 'string', default: 'engine' },
    connections: { type: 'string', default: '20000' },
    clients: { type: 'string' },
    addresses: { type: 'string', default: '128' },
    'max-inflight-requests': { type: 'string', default: '32' },
    'flow-queue-size': { type: 'string', default: '64' },
    'flow-queue-ttl-ms': { type: 'string', default: '2000' },
    'max-tokens': { type: 'string', default: '8' },
    'timeout-ms': { type: 'string', default: '120000' },
    'server-args': { type: 'string', default: '' },
    'fd-limit': { type: 'string' },
    out: { type: 'string' },
  },
});
const mode = values.mode;
if (mode !== 'engine' && mode !== 'gateway') throw new Error(`--mode: expected engine or gateway, got ${mode}`);
const numConnections = Number(values.connections);
const caps = { maxInflightRequests: Number(values['max-inflight-requests']), flowQueueSize: Number(values['flow-queue-size']), flowQueueTtlMs: Number(values['flow-queue-ttl-ms']) };
const extra = values['server-args'].split(' ').filter((a) => a !== '');

const servers = await startTarget(mode, caps, extra, values['fd-limit'] === undefined ? {} : { fdLimit: Number(values['fd-limit']) });
let report: BurstReport;
try {
  report = await runBurst({
    targets: servers.map((s) => ({ name: s.name, url: s.url, probeUrl: s.probeUrl, pid: s.pid })),
    numConnections,
    numClients: Number(values.clients ?? Math.max(1, Math.ceil(numConnections / 5000))),
    numAddresses: Number(values.addresses),
    model: 'headroom-mock',
    maxTokens: Number(values['max-tokens']),
    timeoutMs: Number(values['timeout-ms']),
    idleTimeoutMs: 30_000,
  });
} finally {
  for (const s of servers) await s.stop();
}
const exits = Object.fromEntries(servers.map((s) => [s.name, s.exit()]));
const out = { mode, caps, serverArgs: extra, ...report, exits };
const text = formatReport(mode, report);
if (values.out !== undefined) {
  mkdirSync(values.out, { recursive: true });
  writeFileSync(path.join(values.out, 'report.json'), `${JSON.stringify(out, null, 2)}\n`);
  writeFileSync(path.join(values.out, 'summary.txt'), `${text}\n`);
}
process.stdout.write(`${text}\n`);
process.exit(report.alive && report.idle.reached ? 0 : 1);

function formatReport(what: string, r: BurstReport): string {
  const lines = [`burst (${what}): ${r.numConnections} connections from ${r.numClients} client processes over ${r.numAddresses || 1} source addresses; opened in ${Math.round(r.openMs)} ms, all ended in ${(r.burstMs / 1000).toFixed(1)} s`];
  const sum = Object.values(r.outcomes).reduce((a, b) => a + b, 0);
  lines.push(`outcomes (sum ${sum}):`);
  for (const [k, n] of Object.entries(r.outcomes)) {
    const l = r.latencyMs[k]!;
    lines.push(`  ${k.padEnd(28)} ${String(n).padStart(6)}  (${((100 * n) / r.numConnections).toFixed(1)}%; ms p50 ${l.p50}, p99 ${l.p99}, max ${l.max})`);
  }
  for (const [where, h] of [['API port', r.health], ['probe port', r.probeHealth]] as const) {
    if (h !== null) lines.push(`/health on the ${where}: ${h.numAnswered}/${h.numPolls} polls answered (${(100 * h.answeredShare).toFixed(1)}%; within 1 s ${(100 * h.within1sShare).toFixed(1)}%), latency p99 ${h.p99LatencyMs.toFixed(0)} ms, max ${h.maxLatencyMs.toFixed(0)} ms, longest gap ${h.longestGapMs.toFixed(0)} ms; unanswered: ${JSON.stringify(h.failures)}`);
  }
  for (const [name, m] of Object.entries(r.rss)) lines.push(`RSS ${name}: start ${m.startMiB.toFixed(0)} MiB, peak ${m.peakMiB.toFixed(0)} MiB (VmHWM ${m.hwmMiB.toFixed(0)}), end ${m.endMiB.toFixed(0)} MiB, ${m.numSamples} samples`);
  for (const [name, h] of Object.entries(r.held)) lines.push(`held ${name}: ${JSON.stringify(h)}`);
  for (const [name, s] of Object.entries(r.server)) {
    lines.push(`server ${name}: connections ${JSON.stringify(s.connections)}`);
    for (const [c, v] of Object.entries(s.counters)) lines.push(`  ${c} ${JSON.stringify(v)}`);
  }
  lines.push(`kernel: ${r.kernelListenDrops ?? 'unknown'} connections dropped from full listen queues during the burst (machine-wide)`);
  lines.push(`alive: ${r.alive}; idle: ${r.idle.reached} after ${r.idle.afterMs.toFixed(0)} ms ${JSON.stringify(r.idle.detail)}`);
  return lines.join('\n');
}
