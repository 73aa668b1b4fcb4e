// A burst: N connections opened at once by several client processes (client.ts), each sending one
// streaming chat completion, against a server under test; meanwhile /health is polled every 100 ms
// on a new connection, on the API port and (when the server has one) on its probe port, and the resident memory of every server process is sampled every 100 ms
// (probes.ts). Afterwards the server must return to idle: nothing in flight or queued in flow
// control (no leaked tickets), the engine's queues empty and its free KV blocks back at the
// baseline taken before the burst, and no connection of the burst still open.
//
// The report counts outcomes from the client side (outcome.ts: every connection ends in exactly one
// kind, so they sum to N) and, from the server side, the deltas of its refusal and flow-decision
// counters and its connection guard's overflow and eviction counts, so both views can be compared.
import { fork } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { ClientJob, ClientReport } from './client.ts';
import { counterDelta, get, getJson, HealthPoller, listenDrops, post, RssSampler, scrapeCounters, StatsSampler } from './probes.ts';
import type { HealthSummary, HeldSummary, RssSummary } from './probes.ts';

/** A server process the burst watches; the first one given is the one the burst hits. */
export interface Target {
  readonly name: string;
  readonly url: string;
  /** The server's --probe-port address, if it has one. */
  readonly probeUrl?: string;
  readonly pid: number;
}

export interface BurstOptions {
  readonly targets: readonly Target[];
  readonly numConnections: number;
  /** Client processes (each holds at most numConnections / numClients sockets; keep it ≤ ulimit -n). */
  readonly numClients: number;
  /** Client source addresses (127.1.x.y); 0: all from 127.0.0.1. */
  readonly numAddresses: number;
  readonly model: string;
  readonly maxTokens: number;
  readonly timeoutMs: number;
  /** Longest wait for the server to return to idle after the burst. */
  readonly idleTimeoutMs: number;
}

export interface BurstReport {
  readonly numConnections: number;
  readonly numClients: number;
  readonly numAddresses: number;
  /** Connections per outcome kind (outcome.ts); the values sum to numConnections. */
  readonly outcomes: Record<string, number>;
  readonly latencyMs: Record<string, { p50: number; p99: number; max: number }>;
  /** Time from `go` until the last connection ended, ms. */
  readonly burstMs: number;
  /** Slowest client's time to issue all of its connect()s, ms. */
  readonly openMs: number;
  /** /health polled on the API port, in the same accept queue as the burst. */
  readonly health: HealthSummary;
  /** /health polled on the probe port at the same time (null: the front target has none). */
  readonly probeHealth: HealthSummary | null;
  readonly rss: Record<string, RssSummary>;
  /** Per target: the most it held at once during the burst (/stats every 100 ms). */
  readonly held: Record<string, HeldSummary>;
  /** Per target: counter deltas over the burst (refusals by reason, flow decisions by reason, API outcomes). */
  readonly server: Record<string, { counters: Record<string, Record<string, number>>; connections: unknown }>;
  /** Connections the kernel dropped from a full listen queue during the burst (machine-wide; null if unknown). */
  readonly kernelListenDrops: number | null;
  /** Every target process still running and answering /health 200 after the burst. */
  readonly alive: boolean;
  readonly idle: { reached: boolean; afterMs: number; detail: Record<string, IdleState> };
}

export interface IdleState {
  readonly idle: boolean;
  readonly why: string[];
  readonly freeKvBlocks: number | null;
}

const COUNTERS = ['headroom_refusals_total', 'headroom_flow_decisions_total', 'headroom_api_requests_total'];
const COUNTER_LABEL: Record<string, string> = { headroom_refusals_total: 'reason', headroom_flow_decisions_total: 'reason', headroom_api_requests_total: 'outcome' };
const CLIENT_SCRIPT = fileURLToPath(new URL('./client.ts', import.meta.url));

/** The `i`th client source address: 127.1.0.1, 127.1.0.2, ... (250 per third octet). */
export function clientAddress(i: number): string {
  return `127.1.${Math.floor(i / 250)}.${(i % 250) + 1}`;
}

export async function runBurst(opts: BurstOptions): Promise<BurstReport> {
  const front = opts.targets[0];
  if (front === undefined) throw new Error('runBurst: expected at least one target, got none');
  const body = JSON.stringify({ model: opts.model, messages: [{ role: 'user', content: 'Say something short.' }], max_tokens: opts.maxTokens, stream: true });
  // Warm up (the prefix cache then holds the shared prompt, as it will after the burst) and take the baseline.
  for (let i = 0; i < 4; i++) await postOnce(front.url, body);
  const baseline = await waitIdle(opts.targets, new Map(), opts.idleTimeoutMs);
  if (!baseline.reached) throw new Error(`runBurst: the server is not idle before the burst: ${JSON.stringify(baseline.detail)}`);
  const kvBaseline = new Map(Object.entries(baseline.detail).map(([name, s]) => [name, s.freeKvBlocks]));
  const before = await Promise.all(opts.targets.map((t) => scrapeAll(t.url)));

  const clients = await Promise.all(Array.from({ length: opts.numClients }, (_, c) => startClient(clientJob(opts, body, c))));
  const rssSamplers = opts.targets.map((t) => new RssSampler(t.pid));
  const statsSamplers = opts.targets.map((t) => new StatsSampler(t.url));
  const health = new HealthPoller(front.url);
  const probeHealth = front.probeUrl === undefined ? null : new HealthPoller(front.probeUrl);
  const dropsBefore = listenDrops();
  const t0 = performance.now();
  const reports = await Promise.all(clients.map((c) => c.go()));
  const burstMs = performance.now() - t0;
  const dropsAfter = listenDrops();
  const kernelListenDrops = dropsBefore === null || dropsAfter === null ? null : dropsAfter - dropsBefore;
  const healthSummary = await health.stop();
  const probeHealthSummary = (await probeHealth?.stop()) ?? null;
  const heldList = await Promise.all(statsSamplers.map((s) => s.stop()));
  const held = Object.fromEntries(opts.targets.map((t, i) => [t.name, heldList[i]!]));

  const idle = await waitIdle(opts.targets, kvBaseline, opts.idleTimeoutMs);
  const rss = Object.fromEntries(opts.targets.map((t, i) => [t.name, rssSamplers[i]!.stop()]));
  const after = await Promise.all(opts.targets.map((t) => scrapeAll(t.url)));
  const server: BurstReport['server'] = {};
  for (const [i, t] of opts.targets.entries()) {
    const stats = await getJson(t.url, '/stats');
    server[t.name] = { counters: counterDelta(before[i]!, after[i]!), connections: stats?.['connections'] ?? null };
  }
  const alive = (await Promise.all(opts.targets.map(async (t) => isRunning(t.pid) && (await get(t.url, '/health', 5000))?.status === 200))).every(Boolean);

  const latencies: Record<string, number[]> = {};
  for (const r of reports) for (const [k, v] of Object.entries(r.latenciesMs)) (latencies[k] ??= []).push(...v);
  const kinds = Object.keys(latencies).sort();
  const outcomes: Record<string, number> = Object.fromEntries(kinds.map((k) => [k, latencies[k]!.length]));
  const latencyMs: BurstReport['latencyMs'] = Object.fromEntries(kinds.map((k) => [k, quantiles(latencies[k]!)]));
  return { numConnections: opts.numConnections, numClients: opts.numClients, numAddresses: opts.numAddresses, outcomes, latencyMs, burstMs, openMs: Math.max(...reports.map((r) => r.openMs)), health: healthSummary, probeHealth: probeHealthSummary, rss, held, server, kernelListenDrops, alive, idle };
}

function clientJob(opts: BurstOptions, body: string, c: number): ClientJob {
  const url = new URL(opts.targets[0]!.url);
  const numConnections = Math.floor(opts.numConnections / opts.numClients) + (c < opts.numConnections % opts.numClients ? 1 : 0);
  // Each address belongs to one client process, so each process binds its own port ranges.
  const addresses = [];
  for (let a = c; a < opts.numAddresses; a += opts.numClients) addresses.push(clientAddress(a));
  return { host: url.hostname, port: Number(url.port), numConnections, addresses, body, timeoutMs: opts.timeoutMs };
}

interface StartedClient {
  go(): Promise<ClientReport>;
}

/** Forks a client process with its job; resolves once it is ready (so `go` starts every client together). */
function startClient(job: ClientJob): Promise<StartedClient> {
  const child: ChildProcess = fork(CLIENT_SCRIPT, ['--burst-client'], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const exited = new Promise<never>((_, reject) => child.once('exit', (code) => reject(new Error(`a burst client exited with ${code} before reporting`))));
  exited.catch(() => {});
  return new Promise((resolve, reject) => {
    void exited.catch(reject);
    child.once('message', () => {
      resolve({
        go: () => {
          const report = new Promise<ClientReport>((res) => child.once('message', (m: { report: ClientReport }) => res(m.report)));
          child.send('go');
          return Promise.race([report, exited]);
        },
      });
    });
    child.send(job);
  });
}

/** Polls every target's /stats until all are idle (KV free blocks at `kvBaseline` where given) or `timeoutMs` passes. */
async function waitIdle(targets: readonly Target[], kvBaseline: ReadonlyMap<string, number | null>, timeoutMs: number): Promise<BurstReport['idle']> {
  const t0 = performance.now();
  for (;;) {
    const detail: Record<string, IdleState> = {};
    for (const [i, t] of targets.entries()) detail[t.name] = idleState(await getJson(t.url, '/stats'), kvBaseline.get(t.name) ?? null, i === 0);
    const reached = Object.values(detail).every((s) => s.idle);
    const afterMs = performance.now() - t0;
    if (reached || afterMs > timeoutMs) return { reached, afterMs, detail };
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** Whether one server is idle by its /stats, engine or gateway mode alike. */
export function idleState(stats: Record<string, unknown> | null, kvBaseline: number | null, front: boolean): IdleState {
  if (stats === null) return { idle: false, why: ['/stats did not answer'], freeKvBlocks: null };
  const why: string[] = [];
  const s = stats as { flow?: { inFlight: Record<string, number>; queued: number[] }; engine?: { scheduler: { numRunning: number; numWaiting: number; numFreeBlocks: number } }; gateway?: { numInFlight: number }; connections?: { numOpen: number } };
  if (s.flow !== undefined) {
    for (const [k, v] of Object.entries(s.flow.inFlight)) if (v !== 0) why.push(`flow in flight ${k}: ${v}`);
    const queued = s.flow.queued.reduce((a, b) => a + b, 0);
    if (queued !== 0) why.push(`flow queued: ${queued}`);
  }
  const sched = s.engine?.scheduler;
  if (sched !== undefined) {
    if (sched.numRunning !== 0 || sched.numWaiting !== 0) why.push(`engine running ${sched.numRunning}, waiting ${sched.numWaiting}`);
    if (kvBaseline !== null && sched.numFreeBlocks !== kvBaseline) why.push(`free KV blocks ${sched.numFreeBlocks}, baseline ${kvBaseline}`);
  }
  if (s.gateway !== undefined && s.gateway.numInFlight !== 0) why.push(`gateway in flight: ${s.gateway.numInFlight}`);
  // The front door's only connection now is this /stats read.
  if (front && s.connections !== undefined && s.connections.numOpen > 1) why.push(`connections open: ${s.connections.numOpen}`);
  return { idle: why.length === 0, why, freeKvBlocks: sched?.numFreeBlocks ?? null };
}

async function scrapeAll(url: string): Promise<Record<string, Record<string, number>>> {
  const out: Record<string, Record<string, number>> = {};
  for (const name of COUNTERS) Object.assign(out, await scrapeCounters(url, [name], COUNTER_LABEL[name]!));
  return out;
}

/** One request on a fresh connection, body read to the end (the warm-up). */
async function postOnce(baseUrl: string, body: string): Promise<void> {
  const a = await post(baseUrl, '/v1/chat/completions', body, 30_000);
  if (a?.status !== 200) throw new Error(`runBurst: the warm-up request got ${a === null ? 'no answer' : a.status}`);
}

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function quantiles(v: number[]): { p50: number; p99: number; max: number } {
  const s = [...v].sort((a, b) => a - b);
  const q = (p: number): number => Math.round(s[Math.min(s.length - 1, Math.floor(s.length * p))]!);
  return { p50: q(0.5), p99: q(0.99), max: Math.round(s.at(-1)!) };
}
