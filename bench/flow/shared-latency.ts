// What sharing the caps through Redis costs per request: the time from `acquire` to a ticket, local
// flow control (FlowController) against shared (SharedFlowController over a real redis-server on
// this machine, loopback TCP), in two shapes:
//
//   serial      one request at a time: acquire, release, next (--pairs pairs; a warm-up of 1,000
//               first, not recorded) — the round trip every request pays
//   concurrent  --workers loops on each of two replicas sharing one Redis, cap --cap requests, each
//               holding its ticket for one event-loop turn: acquires per second and their latency
//               (a wait for capacity included) with the script doing real work, and how the grants
//               split between the replicas (nothing orders waiters across replicas)
//
// Prints one JSON line per arm, latency quantiles in microseconds. Starts its own redis-server on a
// free port unless --redis-url is given. Numbers are for this machine; compare arms, not machines.
//
//   node --import tsx bench/flow/shared-latency.ts [--pairs 10000] [--workers 32] [--cap 16] [--seconds 3]
import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import type { FlowControl, FlowRequest } from '../../src/flow/flow-control.ts';
import type { FlowLimits } from '../../src/flow/flow-core.ts';
import { FlowController } from '../../src/flow/flow-controller.ts';
import { SharedFlowController } from '../../src/flow/shared-flow-controller.ts';
import { RedisStore } from '../../src/flow/shared-store.ts';
import { RedisServer } from '../../test/helpers/redis-server.ts';

const { values } = parseArgs({ options: { pairs: { type: 'string', default: '10000' }, workers: { type: 'string', default: '32' }, cap: { type: 'string', default: '16' }, seconds: { type: 'string', default: '3' }, 'redis-url': { type: 'string' } } });
const PAIRS = Number(values.pairs);
const WORKERS = Number(values.workers);
const CAP = Number(values.cap);
const SECONDS = Number(values.seconds);

const REQ: FlowRequest = { caller: { tenant: 'default', role: 'user' }, band: 0, inputTokens: 100, totalTokens: 200 };

function limits(cap: number): FlowLimits {
  return { maxRequests: cap, maxInputTokens: 1_000_000, maxTotalTokens: Infinity, shares: [1], queueSize: 10_000, queueTtlMs: 60_000 };
}

function shared(url: string, prefix: string, cap: number): SharedFlowController {
  return new SharedFlowController(limits(cap), new RedisStore({ url, leaseMs: 5000, timeoutMs: 200, keyPrefix: prefix }), { replicas: 2, leaseMs: 5000, pollMs: 1 });
}

function quantiles(samplesUs: number[]): { p50: number; p90: number; p99: number; max: number } {
  const s = samplesUs.sort((a, b) => a - b);
  const q = (p: number): number => Math.round(s[Math.min(s.length - 1, Math.floor(p * s.length))]! * 10) / 10;
  return { p50: q(0.5), p90: q(0.9), p99: q(0.99), max: q(1) };
}

async function serial(flow: FlowControl, pairs: number): Promise<number[]> {
  const us: number[] = [];
  for (let i = 0; i < pairs; i++) {
    const t0 = performance.now();
    const r = await flow.acquire(REQ, new AbortController().signal);
    us.push((performance.now() - t0) * 1000);
    if (!r.ok) throw new Error('bench: refused');
    r.ticket.release();
  }
  return us;
}

async function concurrent(flows: readonly FlowControl[]): Promise<{ acquiresPerS: number; us: number[]; perReplica: number[] }> {
  const us: number[] = [];
  const perReplica = flows.map(() => 0);
  const end = performance.now() + SECONDS * 1000;
  await Promise.all(
    Array.from({ length: WORKERS * flows.length }, async (_, w) => {
      const flow = flows[w % flows.length]!;
      while (performance.now() < end) {
        const t0 = performance.now();
        const r = await flow.acquire(REQ, new AbortController().signal);
        us.push((performance.now() - t0) * 1000);
        if (!r.ok) throw new Error('bench: refused');
        perReplica[w % flows.length]!++;
        await new Promise((res) => setImmediate(res));
        r.ticket.release();
      }
    }),
  );
  return { acquiresPerS: Math.round(us.length / SECONDS), us, perReplica };
}

const server = values['redis-url'] === undefined ? await RedisServer.start() : null;
const url = values['redis-url'] ?? server!.url;
/** A replica serves from its local share until its first sync answers: wait for that, so every arm measures what it says. */
async function connected(flows: readonly SharedFlowController[]): Promise<void> {
  while (!flows.every((f) => f.state().shared?.mode === 'redis')) await new Promise((r) => setTimeout(r, 10));
}
try {
  const local = new FlowController(limits(CAP));
  await serial(local, 1000);
  console.log(JSON.stringify({ arm: 'local', shape: 'serial', pairs: PAIRS, acquireUs: quantiles(await serial(local, PAIRS)) }));
  const one = shared(url, `{bench-${randomUUID()}}`, CAP);
  await connected([one]);
  await serial(one, 1000);
  console.log(JSON.stringify({ arm: 'redis', shape: 'serial', pairs: PAIRS, acquireUs: quantiles(await serial(one, PAIRS)), mode: one.state().shared?.mode }));
  await one.close();

  const localC = await concurrent([new FlowController(limits(CAP))]);
  console.log(JSON.stringify({ arm: 'local', shape: 'concurrent', workers: WORKERS, cap: CAP, acquiresPerS: localC.acquiresPerS, acquireUs: quantiles(localC.us) }));
  const prefix = `{bench-${randomUUID()}}`;
  const pair = [shared(url, prefix, CAP), shared(url, prefix, CAP)];
  await connected(pair);
  // New state grants nothing for its grace (shared-script.ts): warm up past it.
  await Promise.all(pair.map((f) => serial(f, 100)));
  const sharedC = await concurrent(pair);
  console.log(JSON.stringify({ arm: 'redis', shape: 'concurrent', replicas: 2, workersPerReplica: WORKERS, cap: CAP, acquiresPerS: sharedC.acquiresPerS, acquireUs: quantiles(sharedC.us), grantsPerReplica: sharedC.perReplica, modes: pair.map((p) => p.state().shared?.mode) }));
  await Promise.all(pair.map((p) => p.close()));
} finally {
  await server?.kill();
}
