// What a burst watches besides its own connections: a /health probe every 100 ms, each on a new
// connection (as kubelet's httpGet probe does: a kept-alive socket would dodge the connection bound
// that a real probe must get through), and the resident memory of the server processes, read from
// /proc/<pid>/status every 100 ms (VmHWM, the kernel's own high-water mark, backs the sampled peak).
// Also the one-shot reads of /stats and /metrics, on their own short-lived connections so that
// nothing of the burst's observer stays open on the server.
import { readFileSync } from 'node:fs';
import http from 'node:http';

export interface HttpAnswer {
  readonly status: number;
  readonly body: string;
}

/** GET `path` on a fresh connection; null if no answer within `timeoutMs` or the socket failed. */
export function get(baseUrl: string, path: string, timeoutMs: number): Promise<HttpAnswer | null> {
  return send(baseUrl, 'GET', path, null, timeoutMs).then((a) => (a.status === 0 ? null : a));
}

/** POST a JSON `body` to `path` on a fresh connection, the answer read to its end. */
export function post(baseUrl: string, path: string, body: string, timeoutMs: number): Promise<HttpAnswer | null> {
  return send(baseUrl, 'POST', path, body, timeoutMs).then((a) => (a.status === 0 ? null : a));
}

/** An answer, or status 0 with why there was none in `body` (`timeout`, or the socket error's code). */
function send(baseUrl: string, method: string, path: string, body: string | null, timeoutMs: number): Promise<HttpAnswer> {
  return new Promise((resolve) => {
    const headers = { connection: 'close', ...(body === null ? {} : { 'content-type': 'application/json' }) };
    const req = http.request(new URL(path, baseUrl), { method, agent: false, headers, timeout: timeoutMs }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
      res.on('error', (e: NodeJS.ErrnoException) => resolve({ status: 0, body: e.code ?? 'error' }));
    });
    let timedOut = false;
    req.on('timeout', () => {
      timedOut = true;
      req.destroy();
    });
    req.on('error', (e: NodeJS.ErrnoException) => resolve({ status: 0, body: timedOut ? 'timeout' : (e.code ?? 'error') }));
    req.end(body ?? undefined);
  });
}

export async function getJson(baseUrl: string, path: string, timeoutMs = 5000): Promise<Record<string, unknown> | null> {
  const a = await get(baseUrl, path, timeoutMs);
  if (a === null || a.status !== 200) return null;
  return JSON.parse(a.body) as Record<string, unknown>;
}

/** Sums of each Prometheus counter named in `names`, per value of `label` (other labels summed over). */
export async function scrapeCounters(baseUrl: string, names: readonly string[], label: string): Promise<Record<string, Record<string, number>>> {
  const a = await get(baseUrl, '/metrics', 5000);
  const out: Record<string, Record<string, number>> = {};
  for (const n of names) out[n] = {};
  if (a === null) return out;
  for (const line of a.body.split('\n')) {
    const m = /^([a-z_:]+)\{([^}]*)\} ([0-9.e+-]+)$/.exec(line);
    if (m === null || !names.includes(m[1]!)) continue;
    const key = new RegExp(`${label}="([^"]*)"`).exec(m[2]!)?.[1] ?? '';
    const series = out[m[1]!]!;
    series[key] = (series[key] ?? 0) + Number(m[3]);
  }
  return out;
}

/** Counters after minus before, dropping zeros. */
export function counterDelta(before: Record<string, Record<string, number>>, after: Record<string, Record<string, number>>): Record<string, Record<string, number>> {
  const out: Record<string, Record<string, number>> = {};
  for (const [name, series] of Object.entries(after)) {
    out[name] = {};
    for (const [k, v] of Object.entries(series)) {
      const d = v - (before[name]?.[k] ?? 0);
      if (d !== 0) out[name][k] = d;
    }
  }
  return out;
}

export interface HealthSummary {
  readonly numPolls: number;
  /** Polls answered 200 within the timeout. */
  readonly numAnswered: number;
  readonly answeredShare: number;
  /** Share of polls answered 200 within 1 s (kubelet's default probe timeout). */
  readonly within1sShare: number;
  /** Over answered polls, ms. */
  readonly maxLatencyMs: number;
  readonly p99LatencyMs: number;
  /** The longest stretch without an answer, ms: between two answers' arrivals (or the first poll, or stop()). */
  readonly longestGapMs: number;
  /** Unanswered polls by why: `timeout`, a socket error code (ECONNRESET...), or the HTTP status. */
  readonly failures: Record<string, number>;
}

/**
 * Polls GET /health every `everyMs` on a new connection each time, until stop(). The timeout is the
 * liveness probe's in deploy/k8s/engine.yaml (5 s); the share within kubelet's default 1 s is kept too.
 */
export class HealthPoller {
  readonly #polls: Promise<{ startMs: number; latencyMs: number | null; failure: string | null }>[] = [];
  readonly #timer: NodeJS.Timeout;

  constructor(baseUrl: string, everyMs = 100, timeoutMs = 5000) {
    this.#timer = setInterval(() => {
      const startMs = performance.now();
      this.#polls.push(
        send(baseUrl, 'GET', '/health', null, timeoutMs).then((a) => {
          const ok = a.status === 200;
          return { startMs, latencyMs: ok ? performance.now() - startMs : null, failure: ok ? null : a.status === 0 ? a.body : String(a.status) };
        }),
      );
    }, everyMs);
  }

  async stop(): Promise<HealthSummary> {
    clearInterval(this.#timer);
    const stopMs = performance.now();
    const polls = await Promise.all(this.#polls);
    const answered = polls.filter((p) => p.latencyMs !== null);
    const lat = answered.map((p) => p.latencyMs!).sort((a, b) => a - b);
    // Gaps between consecutive answers (by when they arrived), from the first poll to the last stop.
    const ends = [polls[0]?.startMs ?? stopMs, ...answered.map((p) => p.startMs + p.latencyMs!).sort((a, b) => a - b), stopMs];
    let longestGapMs = 0;
    for (let i = 1; i < ends.length; i++) longestGapMs = Math.max(longestGapMs, ends[i]! - ends[i - 1]!);
    const failures: Record<string, number> = {};
    for (const p of polls) if (p.failure !== null) failures[p.failure] = (failures[p.failure] ?? 0) + 1;
    return {
      failures,
      numPolls: polls.length,
      numAnswered: answered.length,
      answeredShare: polls.length === 0 ? 0 : answered.length / polls.length,
      within1sShare: polls.length === 0 ? 0 : lat.filter((l) => l <= 1000).length / polls.length,
      maxLatencyMs: lat.at(-1) ?? 0,
      p99LatencyMs: lat[Math.min(lat.length - 1, Math.floor(lat.length * 0.99))] ?? 0,
      longestGapMs,
    };
  }
}

export interface RssSummary {
  readonly pid: number;
  /** Before the burst, MiB. */
  readonly startMiB: number;
  /** Largest sample, MiB. */
  readonly peakMiB: number;
  /** VmHWM at the end: the process's peak since it started, MiB (catches a spike between samples). */
  readonly hwmMiB: number;
  /** After the burst and the return to idle, MiB. */
  readonly endMiB: number;
  readonly numSamples: number;
}

/** Reads a /proc/<pid>/status field in MiB, or null once the process is gone. */
export function procStatusMiB(pid: number, field: 'VmRSS' | 'VmHWM'): number | null {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status);
    return m === null ? null : Number(m[1]) / 1024;
  } catch {
    return null;
  }
}

/** Samples VmRSS of `pid` every `everyMs` until stop(). */
export class RssSampler {
  readonly #pid: number;
  readonly #startMiB: number;
  readonly #timer: NodeJS.Timeout;
  #peakMiB: number;
  #numSamples = 0;

  constructor(pid: number, everyMs = 100) {
    this.#pid = pid;
    this.#startMiB = procStatusMiB(pid, 'VmRSS') ?? 0;
    this.#peakMiB = this.#startMiB;
    this.#timer = setInterval(() => {
      const v = procStatusMiB(pid, 'VmRSS');
      if (v === null) return;
      this.#numSamples++;
      this.#peakMiB = Math.max(this.#peakMiB, v);
    }, everyMs);
  }

  stop(): RssSummary {
    clearInterval(this.#timer);
    const end = procStatusMiB(this.#pid, 'VmRSS') ?? 0;
    return { pid: this.#pid, startMiB: this.#startMiB, peakMiB: Math.max(this.#peakMiB, end), hwmMiB: procStatusMiB(this.#pid, 'VmHWM') ?? 0, endMiB: end, numSamples: this.#numSamples };
  }
}

/** The most a server held at once, from /stats samples (a sample the server did not answer is skipped). */
export interface HeldSummary {
  readonly numSamples: number;
  /** Requests holding a flow-control slot. */
  readonly maxFlowInFlight: number;
  /** Requests in flow control's wait queue. */
  readonly maxFlowQueued: number;
  /** Requests the engine held (running plus waiting); engine mode only. */
  readonly maxEngineHeld: number;
  /** Requests the gateway was forwarding; gateway mode only. */
  readonly maxGatewayInFlight: number;
  /** Open client connections (the connection guard's count). */
  readonly maxConnections: number;
}

/** Samples GET /stats every `everyMs` (on a new connection each time) for what the server holds. */
export class StatsSampler {
  readonly #timer: NodeJS.Timeout;
  readonly #pending: Promise<void>[] = [];
  #held = { numSamples: 0, maxFlowInFlight: 0, maxFlowQueued: 0, maxEngineHeld: 0, maxGatewayInFlight: 0, maxConnections: 0 };

  constructor(baseUrl: string, everyMs = 100) {
    this.#timer = setInterval(() => this.#pending.push(getJson(baseUrl, '/stats', 2000).then((s) => this.#add(s))), everyMs);
  }

  #add(stats: Record<string, unknown> | null): void {
    if (stats === null) return;
    const s = stats as { flow?: { inFlight: { requests: number }; queued: number[] }; engine?: { scheduler: { numRunning: number; numWaiting: number } }; gateway?: { numInFlight: number }; connections?: { numOpen: number } };
    const h = this.#held;
    h.numSamples++;
    h.maxFlowInFlight = Math.max(h.maxFlowInFlight, s.flow?.inFlight.requests ?? 0);
    h.maxFlowQueued = Math.max(h.maxFlowQueued, (s.flow?.queued ?? []).reduce((a, b) => a + b, 0));
    h.maxEngineHeld = Math.max(h.maxEngineHeld, (s.engine?.scheduler.numRunning ?? 0) + (s.engine?.scheduler.numWaiting ?? 0));
    h.maxGatewayInFlight = Math.max(h.maxGatewayInFlight, s.gateway?.numInFlight ?? 0);
    h.maxConnections = Math.max(h.maxConnections, s.connections?.numOpen ?? 0);
  }

  async stop(): Promise<HeldSummary> {
    clearInterval(this.#timer);
    await Promise.all(this.#pending);
    return { ...this.#held };
  }
}

/**
 * The kernel's count of connections dropped because a listen queue was full (TcpExt ListenDrops
 * in /proc/net/netstat; machine-wide, so other traffic adds to it). A client whose handshake
 * completed on its side but whose server never accepted it waits, then gets a reset from the
 * kernel: a loss that no server code sees, told apart from the connection guard's evictions here.
 */
export function listenDrops(): number | null {
  try {
    const lines = readFileSync('/proc/net/netstat', 'utf8').split('\n');
    for (let i = 0; i + 1 < lines.length; i += 2) {
      const names = lines[i]!.split(/\s+/);
      if (names[0] !== 'TcpExt:') continue;
      const col = names.indexOf('ListenDrops');
      return col < 0 ? null : Number(lines[i + 1]!.split(/\s+/)[col]);
    }
    return null;
  } catch {
    return null;
  }
}
