// A burst of connections against each mode, at a size CI can afford (bench/burst/burst.ts runs the
// full 20,000; results/burst/README.md has those numbers and the runs behind the choices here).
// 5,000 connections at once: each test takes 4–8 s on 2 busy cores (under a minute with room for
// a slower runner), and the burst still passes every bound the full one meets. On this kind of
// machine a server holds at most ~1,000 connections at once however many arrive (it refuses as
// fast as it accepts; the kernel's backlog holds the rest), so against the machine's 20,000
// descriptors no burst here would ever near the limit: the server runs with an open-file limit of
// 1,024 (the usual soft default), which it does meet, so the connection guard's fd margin is
// exercised as well as its bound. The server keeps its default connection bounds (1,024 open, 256
// per address); the clients spread over 128 loopback addresses (39 connections each), as a crowd
// would, so the total bound is the one met. Capacity is small: 32 requests in flight, a flow queue
// of 64 with a 2 s TTL.
//
// Every connection must end in an answer or a refusal the server counted (the outcome kinds sum to
// N; 429s equal the server's flow_cap refusals; connections closed without an answer are at most
// the guard's evictions), the caps must hold (never more than 32 requests in flight nor 64 queued),
// /health must answer throughout on the probe port (no 5 s without an answer), resident memory must stay under
// RSS_BOUND_MIB, no process may exit before it is stopped (and then it drains, exit 0), and
// afterwards every server must be idle: nothing in flight or queued, KV blocks back, no socket left.
//
// Seen failing (results/burst/README.md): with the connection guard disabled (connections closed
// that the guard did not evict; in gateway mode 503 engine_unavailable, the gateway out of
// descriptors), with the flow request cap ignored (the engine held 881 at once; in gateway mode
// 503 engine_unavailable once the upstream's per-address bound refused the flood), with the flow queue
// bound ignored (849 queued), and with one flow ticket in 50 never released (not idle afterwards).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { readFdLimit } from '../../src/api/connections.ts';
import { runBurst } from '../../bench/burst/run-burst.ts';
import type { BurstReport } from '../../bench/burst/run-burst.ts';
import { startTarget } from '../../bench/burst/servers.ts';
import type { Caps, ServerProcess } from '../../bench/burst/servers.ts';

const NUM_CONNECTIONS = Number(process.env['BURST_N'] ?? 5000);
const CAPS: Caps = { maxInflightRequests: 32, flowQueueSize: 64, flowQueueTtlMs: 2000 };
/** The server's open-file limit: one the burst reaches (see the header). */
const SERVER_FD_LIMIT = Math.min(Number(process.env['BURST_FD'] ?? 1024), readFdLimit());
/** Client sockets per client process: under this process's limit (which the children inherit). */
const PER_CLIENT = Math.min(2500, readFdLimit() - 256);
/**
 * Resident memory bound per server process, MiB. Measured (results/burst/README.md): idle servers
 * hold 135–150 MiB; in five 5,000-connection bursts per mode (two at a 4,096-descriptor limit, three at 1,024) the peaks were 176–201 MiB (engine),
 * 205–229 MiB (gateway), 148–156 MiB (its upstream). 300 MiB is 30% over the highest peak, for a
 * slower machine and GC timing. It guards against gross growth (a server that buffered what it
 * should refuse); it is not what catches a broken cap: with the flow cap removed the peaks were
 * 232–237 MiB, and the held-request assertion is the one that failed.
 */
const RSS_BOUND_MIB = 300;
/**
 * Refusals a burst may get: flow control's (queue full, or the queue's TTL), the connection guard's,
 * admission's, the engine's own queue bound. Not `503 engine_unavailable`: in gateway mode that is
 * the gateway failing to reach its upstream (seen with the guard disabled: out of descriptors).
 */
const REFUSALS = new Set(['429 queue_full', '429 queue_ttl', '503 too_many_connections', '503 slo_unattainable', '503 capacity']);
/** Connections closed without an answer: the guard's evictions (FIN, or a reset if bytes were unread). */
const EVICTED = new Set(['closed', 'reset']);

interface Run {
  readonly report: BurstReport;
  readonly servers: readonly ServerProcess[];
  /** Each process's exit before it was stopped (null: still running), then after SIGTERM. */
  readonly exitsBeforeStop: readonly unknown[];
}

async function burst(mode: 'engine' | 'gateway'): Promise<Run> {
  const servers = await startTarget(mode, CAPS, [], { fdLimit: SERVER_FD_LIMIT });
  let exitsBeforeStop: unknown[] = [];
  try {
    const report = await runBurst({
      targets: servers.map((s) => ({ name: s.name, url: s.url, probeUrl: s.probeUrl, pid: s.pid })),
      numConnections: NUM_CONNECTIONS,
      numClients: Math.ceil(NUM_CONNECTIONS / PER_CLIENT),
      numAddresses: 128,
      model: 'headroom-mock',
      maxTokens: 8,
      timeoutMs: 30_000,
      idleTimeoutMs: 10_000,
    });
    exitsBeforeStop = servers.map((s) => s.exit());
    return { report, servers, exitsBeforeStop };
  } finally {
    for (const s of servers) await s.stop();
  }
}

function assertBurst({ report: r, servers, exitsBeforeStop }: Run): void {
  const summary = JSON.stringify(r);
  // Nothing crashed: every process ran to the end, answered /health, and then drained cleanly (exit 0).
  assert.ok(r.alive, `a server died or stopped answering: ${summary}`);
  assert.deepEqual(exitsBeforeStop, servers.map(() => null));
  for (const s of servers) assert.deepEqual(s.exit(), { code: 0, signal: null }, `${s.name} exit; output: ${s.tail()}`);
  // Every connection ended in exactly one counted kind.
  assert.equal(Object.values(r.outcomes).reduce((a, b) => a + b, 0), NUM_CONNECTIONS, `outcomes: ${summary}`);
  const unexpected = Object.keys(r.outcomes).filter((k) => k !== 'ok' && !REFUSALS.has(k) && !EVICTED.has(k));
  assert.deepEqual(unexpected, [], `outcomes other than answers, refusals and evictions: ${summary}`);
  assert.ok((r.outcomes['ok'] ?? 0) > 0, 'some requests were served');
  const front = r.server[servers[0]!.name]!;
  const guard = front.connections as { numEvicted: number; numOverflow: number; numIdleClosed: number };
  // Closed without an answer: only the guard may do that, evicting an overflow connection or closing
  // one that sent no request within a second (a socket closed with unread bytes gets a reset instead
  // of a FIN; a client that writes after the close gets one too). Resets beyond them are allowed
  // only when the kernel dropped handshakes from a full listen queue (those clients get a reset from
  // the kernel, later). The idle closes were not counted before a CI run on a loaded runner saw 22
  // resets with no eviction and no listen drop (not reproduced since; the whole report is in the message).
  const closedByGuard = guard.numEvicted + guard.numIdleClosed;
  const numClosed = r.outcomes['closed'] ?? 0;
  const numUnanswered = [...EVICTED].reduce((a, k) => a + (r.outcomes[k] ?? 0), 0);
  assert.ok(numClosed <= closedByGuard, `${numClosed} connections closed without an answer, the guard evicted ${guard.numEvicted} and closed ${guard.numIdleClosed} idle: ${summary}`);
  if ((r.kernelListenDrops ?? 0) === 0) assert.ok(numUnanswered <= closedByGuard, `${numUnanswered} connections closed or reset without an answer, the guard evicted ${guard.numEvicted} and closed ${guard.numIdleClosed} idle, no listen-queue drops: ${summary}`);
  assert.ok((r.outcomes['503 too_many_connections'] ?? 0) <= guard.numOverflow, `503 too_many_connections beyond the front door's overflow count: ${summary}`);
  // 429s: flow control's refusals, each one counted by the server.
  const num429 = Object.entries(r.outcomes).filter(([k]) => k.startsWith('429 ')).reduce((a, [, n]) => a + n, 0);
  assert.equal(num429, front.counters['headroom_refusals_total']?.['flow_cap'] ?? 0, `client 429s vs server flow_cap refusals: ${summary}`);
  // The caps held: never more than the in-flight cap running, nor more than the queue waiting.
  for (const [name, h] of Object.entries(r.held)) {
    assert.ok(h.numSamples > 0, `${name}: /stats was sampled`);
    assert.ok(h.maxFlowInFlight <= CAPS.maxInflightRequests && h.maxFlowQueued <= CAPS.flowQueueSize, `${name} held ${JSON.stringify(h)}`);
    assert.ok(h.maxEngineHeld <= CAPS.maxInflightRequests && h.maxGatewayInFlight <= CAPS.maxInflightRequests, `${name} held ${JSON.stringify(h)}`);
  }
  // /health answered throughout on the probe port (--probe-port, as deploy/k8s probes it): at
  // most 2% of polls unanswered within their 5 s timeout, and no stretch of 5 s (the liveness
  // probe's timeout) without an answer. On the API port a probe's handshake queues behind the
  // burst's 5,000 in the kernel's listen and accept queues: under a loaded full-suite run it lost
  // 20% of its polls (2026-12-02, 59 of 74), and with two busy loops beside the burst 17–38%, with
  // gaps of 4.2–4.5 s, while the probe port answered every poll within 1.3 s (results/burst/README.md).
  // The API port's polls are kept in the report (in every failure message), not asserted.
  const probe = r.probeHealth;
  assert.ok(probe !== null, 'the front server has a probe port');
  assert.ok(probe.numPolls > 0 && probe.answeredShare >= 0.98 && probe.longestGapMs < 5000, `/health on the probe port: ${JSON.stringify(probe)}; on the API port: ${JSON.stringify(r.health)}`);
  for (const [name, m] of Object.entries(r.rss)) assert.ok(Math.max(m.peakMiB, m.hwmMiB) < RSS_BOUND_MIB, `${name} RSS ${JSON.stringify(m)} over ${RSS_BOUND_MIB} MiB`);
  assert.ok(r.idle.reached, `not idle afterwards: ${JSON.stringify(r.idle)}`);
}

test(`engine mode: ${NUM_CONNECTIONS} connections at once against 32 in flight, a queue of 64 and a ${SERVER_FD_LIMIT}-descriptor limit: all answered or refused by reason, bounded memory, /health up, idle after`, { timeout: 120_000 }, async () => {
  assertBurst(await burst('engine'));
});

test(`gateway mode: the same burst against a gateway with the same caps in front of a mock-runner serve`, { timeout: 120_000 }, async () => {
  assertBurst(await burst('gateway'));
});
