// The options every serving command shares (`serve` in engine mode, `gateway`), so both front
// doors read the same flags the same way: listening, budgets, HTTP timeouts and connection bounds,
// metrics and tracing, logs, API keys, CORS, flow control (local, or shared between replicas
// through Redis with --flow-redis-url); and the same signal handling (first
// SIGTERM/SIGINT drains, a second exits at once). Values are checked here, once, and a bad one is
// a StartupError naming the flag.

import { open } from 'node:fs/promises';
import type { Command } from 'commander';
import { Option } from 'commander';
import { KeyRing } from '../../api/auth.ts';
import { LOG_FORMATS, LOG_LEVELS, serverConfig } from '../../api/config.ts';
import type { LogFormat, LogLevel, ServerConfig } from '../../api/config.ts';
import type { DrainOutcome } from '../../app.ts';
import { FlowController } from '../../flow/flow-controller.ts';
import type { FlowLimits } from '../../flow/flow-core.ts';
import { SharedFlowController } from '../../flow/shared-flow-controller.ts';
import { RedisStore, checkRedisUrl } from '../../flow/shared-store.ts';
import { parseBandShares } from '../../flow/priority.ts';
import { EXIT_CODES, StartupError } from '../startup-errors.ts';

export interface ServerFlags {
  host: string;
  port: string;
  probePort?: string;
  sloMs: string;
  minSloMs: string;
  maxSloMs: string;
  maxOutputTokens: string;
  bodyLimitBytes: string;
  drainTimeoutMs: string;
  headersTimeoutMs: string;
  requestTimeoutMs: string;
  keepAliveTimeoutMs: string;
  maxConnections: string;
  maxConnectionsPerAddress: string;
  otelEndpoint?: string;
  metrics: boolean;
  logLevel: LogLevel;
  logFormat: LogFormat;
  logPrompts: boolean;
  apiKeyFile?: string;
  corsOrigin: string[];
  protectMetrics: boolean;
}

export interface FlowFlags {
  maxInflightRequests: string;
  maxInflightTokens: string;
  maxInflightTotalTokens: string;
  flowQueueSize: string;
  flowQueueTtlMs: string;
  priorityBands: string;
  flowRedisUrl?: string;
  flowReplicas: string;
  flowRedisLeaseMs: string;
  flowRedisTimeoutMs: string;
  flowRedisPollMs: string;
}

export const int = (name: string, v: string): number => {
  const n = Number(v);
  if (v.trim() === '' || !Number.isInteger(n)) throw new StartupError(`--${name}: expected an integer, got '${v}'`);
  return n;
};

/** A finite number that `ok` accepts, else a start-up error naming the flag and `expected`. */
export const number = (name: string, v: string, ok: (n: number) => boolean, expected: string): number => {
  const n = Number(v);
  if (v.trim() === '' || !Number.isFinite(n) || !ok(n)) throw new StartupError(`--${name}: expected ${expected}, got '${v}'`);
  return n;
};

export const nonNegativeInt = (name: string, v: string): number => {
  const n = int(name, v);
  if (n < 0) throw new StartupError(`--${name}: expected an integer ≥ 0, got '${v}'`);
  return n;
};

/** Listening, budgets, HTTP bounds, observability, logs, keys, CORS. */
export function addServerOptions(cmd: Command): Command {
  return cmd
    .option('--host <host>', 'interface to listen on', '0.0.0.0')
    .option('--port <port>', 'port to listen on', '8000')
    .option('--probe-port <port>', 'also serve /health, /ready and /metrics (only those) on this port, so probes and scrapes never queue behind a crowd of API clients (0: any free port; default: none)')
    .option('--slo-ms <ms>', 'default latency budget per request', '10000')
    .option('--min-slo-ms <ms>', 'smallest x-slo-ms a client may ask for (below: 400 at once, never queued)', '100')
    .option('--max-slo-ms <ms>', 'largest x-slo-ms a client may ask for (above: 400)', '3600000')
    .option('--max-output-tokens <n>', 'largest max_tokens accepted', '1024')
    .option('--body-limit-bytes <n>', 'largest request body (413 above)', String(1 << 20))
    .option('--drain-timeout-ms <ms>', 'drain deadline after SIGTERM/SIGINT: then running streams get an error event and [DONE], and the process exits', '60000')
    .option('--headers-timeout-ms <ms>', 'longest time to receive request headers (408 and close)', '10000')
    .option('--request-timeout-ms <ms>', 'longest time to receive a whole request, body included (408 and close)', '30000')
    .option('--keep-alive-timeout-ms <ms>', 'idle keep-alive connections close after this', '5000')
    .option('--max-connections <n>', 'most open connections (past it only /health and /ready answer); kept below the open-file limit', '1024')
    .option('--max-connections-per-address <n>', 'most open connections from one client address', '256')
    .option('--otel-endpoint <url>', 'export OpenTelemetry request spans to this OTLP/HTTP collector (off by default)')
    .option('--no-metrics', 'do not serve Prometheus metrics on /metrics')
    .addOption(new Option('--log-level <level>', 'least severe log line written (request lines are info)').choices(LOG_LEVELS).default('info'))
    .addOption(new Option('--log-format <format>', 'log lines as JSON objects or as text').choices(LOG_FORMATS).default('json'))
    .option('--log-prompts', 'put prompt and output text in request log lines (never otherwise)', false)
    .option('--api-key-file <file>', "API keys, one 'key tenant [role]' per line (role user|operator); also HEADROOM_API_KEYS. /health, /ready, /metrics stay open")
    .option('--protect-metrics', 'with API keys, /metrics needs a key too (default: open, like /health and /ready)', false)
    .option('--cors-origin <origin>', 'allow browsers on this origin (scheme://host[:port], or *) to call the API; repeatable', (v: string, prev: string[]) => [...prev, v], [] as string[]);
}

export function addFlowOptions(cmd: Command): Command {
  return cmd
    .option('--max-inflight-requests <n>', 'flow control: most requests in flight (0: unlimited); past it requests wait in the flow queue or get 429', '0')
    .option('--max-inflight-tokens <n>', 'flow control: most prompt tokens of the requests in flight (0: unlimited)', '0')
    .option('--max-inflight-total-tokens <n>', 'flow control: most prompt plus max_tokens × n of the requests in flight (0: unlimited)', '0')
    .option('--flow-queue-size <n>', 'flow control: most requests waiting for a slot, all bands together (0: 429 at once)', '256')
    .option('--flow-queue-ttl-ms <ms>', 'flow control: longest wait for a slot, then 429 with Retry-After', '5000')
    .option('--priority-bands <shares>', "flow control: each priority band's share of the caps and the queue, lowest band first (x-headroom-priority 0..n-1; no header: the top band)", '1')
    .option('--flow-redis-url <url>', 'flow control shared by several replicas: the caps hold across every process given this Redis (redis://host:port[/db]); unreachable: each serves a local share')
    .option('--flow-replicas <n>', 'shared flow control: while Redis is unreachable each replica serves ⌊cap / n⌋ of each cap (0: the replicas last seen live in Redis)', '0')
    .option('--flow-redis-lease-ms <ms>', "shared flow control: a replica silent this long (crashed) is dropped and its slots come back", '5000')
    .option('--flow-redis-timeout-ms <ms>', 'shared flow control: a Redis call slower than this fails, and the replica serves its local share', '200')
    .option('--flow-redis-poll-ms <ms>', 'shared flow control: requests waiting for capacity another replica may free are retried this often', '10');
}

export function serverConfigOf(f: ServerFlags, extra: Partial<ServerConfig> = {}): ServerConfig {
  const port = int('port', f.port);
  const probePort = f.probePort === undefined ? null : int('probe-port', f.probePort);
  if (probePort !== null && (probePort < 0 || probePort > 65535)) throw new StartupError(`--probe-port: expected a port in [0, 65535], got '${f.probePort}'`);
  if (probePort !== null && probePort !== 0 && probePort === port) throw new StartupError(`--probe-port: expected a port other than --port (${port})`);
  return namingFlags(() => serverConfig({
    host: f.host,
    port,
    probePort,
    sloMs: int('slo-ms', f.sloMs),
    minSloMs: int('min-slo-ms', f.minSloMs),
    maxSloMs: int('max-slo-ms', f.maxSloMs),
    maxOutputTokens: int('max-output-tokens', f.maxOutputTokens),
    bodyLimitBytes: int('body-limit-bytes', f.bodyLimitBytes),
    drainTimeoutMs: int('drain-timeout-ms', f.drainTimeoutMs),
    headersTimeoutMs: int('headers-timeout-ms', f.headersTimeoutMs),
    requestTimeoutMs: int('request-timeout-ms', f.requestTimeoutMs),
    keepAliveTimeoutMs: int('keep-alive-timeout-ms', f.keepAliveTimeoutMs),
    maxConnections: int('max-connections', f.maxConnections),
    maxConnectionsPerAddress: int('max-connections-per-address', f.maxConnectionsPerAddress),
    logLevel: f.logLevel,
    logFormat: f.logFormat,
    logPrompts: f.logPrompts,
    corsOrigins: f.corsOrigin,
    protectMetrics: f.protectMetrics,
    ...extra,
  }));
}

/** ServerConfig keys whose flag is not the key in kebab case. */
const FLAG_OF_KEY: Readonly<Record<string, string>> = { corsOrigins: 'cors-origin', servedModelNames: 'served-model-name' };

/** serverConfig()'s checks speak of its keys ('config: expected minSloMs ...'): the error names the flags instead. */
function namingFlags<T>(build: () => T): T {
  try {
    return build();
  } catch (err) {
    const keys = Object.keys(serverConfig());
    const message = (err as Error).message.replace(/^config: /, '').replace(/\b[a-z]+[A-Z]\w*\b/g, (w) => (keys.includes(w) ? `--${FLAG_OF_KEY[w] ?? w.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}` : w));
    throw new StartupError(message, { cause: err });
  }
}

/** --otel-endpoint as given, once it is an http(s) URL (an exporter given anything else never connects, silently). */
export function otelEndpointOf(f: ServerFlags): { otelEndpoint?: string } {
  const v = f.otelEndpoint;
  if (v === undefined) return {};
  let url: URL | null = null;
  try {
    url = new URL(v);
  } catch {
    url = null;
  }
  if (url === null || (url.protocol !== 'http:' && url.protocol !== 'https:')) throw new StartupError(`--otel-endpoint: expected an http(s) URL of an OTLP/HTTP collector, got '${v}'`);
  return { otelEndpoint: v };
}

/** --trace-out must be a file this process can append to (the writer opens it after the port is bound). */
export async function checkTraceOut(file: string | undefined): Promise<void> {
  if (file === undefined) return;
  try {
    await (await open(file, 'a')).close();
  } catch (err) {
    throw new StartupError(`--trace-out: cannot append to ${file} (${(err as NodeJS.ErrnoException).code ?? String(err)})`, { cause: err });
  }
}

export function keysOf(f: ServerFlags): KeyRing | null {
  return KeyRing.load({ ...(f.apiKeyFile === undefined ? {} : { file: f.apiKeyFile }), ...(process.env.HEADROOM_API_KEYS === undefined ? {} : { env: process.env.HEADROOM_API_KEYS }) });
}

/** Flow control from its flags: absent when no cap is set (nothing to count against). */
export function flowOption(f: FlowFlags): { flow?: FlowController | SharedFlowController } {
  const count = (name: string, v: string): number => {
    const n = int(name, v);
    if (n < 0) throw new StartupError(`--${name}: expected an integer ≥ 0, got '${v}'`);
    return n;
  };
  const cap = (name: string, v: string): number => count(name, v) || Infinity;
  const maxRequests = cap('max-inflight-requests', f.maxInflightRequests);
  const maxInputTokens = cap('max-inflight-tokens', f.maxInflightTokens);
  const maxTotalTokens = cap('max-inflight-total-tokens', f.maxInflightTotalTokens);
  let shares: number[];
  try {
    shares = parseBandShares(f.priorityBands);
    const limits = { maxRequests, maxInputTokens, maxTotalTokens, shares, queueSize: count('flow-queue-size', f.flowQueueSize), queueTtlMs: int('flow-queue-ttl-ms', f.flowQueueTtlMs) };
    const on = maxRequests !== Infinity || maxInputTokens !== Infinity || maxTotalTokens !== Infinity;
    // Checked whether or not a Redis URL is given: a bad value is an error where it is written.
    const shared = sharedFlowOptions(f, count);
    if (f.flowRedisUrl !== undefined) {
      if (!on) throw new StartupError('--flow-redis-url: set a cap to share (--max-inflight-requests, --max-inflight-tokens or --max-inflight-total-tokens)');
      return { flow: sharedFlow(f.flowRedisUrl, limits, shared) };
    }
    const flow = new FlowController(limits);
    return on || shares.length > 1 ? { flow } : {};
  } catch (err) {
    if (err instanceof StartupError) throw err;
    throw new StartupError((err as Error).message, { cause: err });
  }
}

interface SharedFlowOptions {
  readonly leaseMs: number;
  readonly timeoutMs: number;
  readonly pollMs: number;
  readonly replicas: number;
}

function sharedFlowOptions(f: FlowFlags, count: (name: string, v: string) => number): SharedFlowOptions {
  const positive = (name: string, v: string): number => {
    const n = int(name, v);
    if (n < 1) throw new StartupError(`--${name}: expected an integer ≥ 1, got '${v}'`);
    return n;
  };
  const leaseMs = positive('flow-redis-lease-ms', f.flowRedisLeaseMs);
  if (leaseMs < 30) throw new StartupError(`--flow-redis-lease-ms: expected at least 30 ms, got '${f.flowRedisLeaseMs}'`);
  const timeoutMs = positive('flow-redis-timeout-ms', f.flowRedisTimeoutMs);
  if (timeoutMs >= leaseMs) throw new StartupError(`--flow-redis-timeout-ms: expected less than --flow-redis-lease-ms (${leaseMs}), got '${f.flowRedisTimeoutMs}'`);
  return { leaseMs, timeoutMs, pollMs: positive('flow-redis-poll-ms', f.flowRedisPollMs), replicas: count('flow-replicas', f.flowReplicas) };
}

function sharedFlow(url: string, limits: FlowLimits, o: SharedFlowOptions): SharedFlowController {
  const bad = checkRedisUrl(url);
  if (bad !== null) throw new StartupError(`--flow-redis-url: ${bad.message}`);
  const store = new RedisStore({ url, leaseMs: o.leaseMs, timeoutMs: o.timeoutMs });
  return new SharedFlowController(limits, store, { replicas: o.replicas, leaseMs: o.leaseMs, pollMs: o.pollMs });
}

/** What the signal handler drives: a server that can drain. */
export interface Drainable {
  readonly app: { readonly log: { info(msg: string): void; warn(msg: string): void } };
  /** False while it cannot serve yet (a signal then exits at once). */
  readonly loaded: boolean;
  drain(): Promise<DrainOutcome>;
}

/** First signal: drain (or exit, if nothing is loaded yet). Second: exit at once. */
export function onSignals(server: Drainable, loadingWhat = 'the model'): void {
  let draining = false;
  const log = server.app.log;
  const onSignal = (sig: string): void => {
    if (draining) {
      log.warn(`${sig} again during the drain: exiting now`);
      process.exit(EXIT_CODES.forced);
    }
    draining = true;
    if (!server.loaded) {
      log.info(`${sig} while loading ${loadingWhat}: exiting`);
      process.exit(EXIT_CODES.drained);
    }
    log.info(`${sig}: draining (no new requests; in-flight ones finish); a second signal exits at once`);
    void server.drain().then((outcome) => {
      log.info(`${outcome === 'drained' ? 'drained' : 'drain deadline passed; running requests were ended with an error'}; exiting`);
      process.exit(outcome === 'drained' ? EXIT_CODES.drained : EXIT_CODES.drainDeadline);
    });
  };
  process.on('SIGTERM', () => onSignal('SIGTERM'));
  process.on('SIGINT', () => onSignal('SIGINT'));
}
