// The options every serving command shares (`serve` in engine mode, `gateway`), so both front
// doors read the same flags the same way: listening, budgets, HTTP timeouts and connection bounds,
// metrics and tracing, logs, API keys, CORS, flow control (local, or shared between replicas
// through Redis with --flow-redis-url); and the same signal handling (first
// SIGTERM/SIGINT drains, a second exits at once). The options are declared, and each value
// checked, in front-door-options.ts; what is checked here involves two options, or the
// filesystem, and a bad one is a StartupError naming the flag.

import { open } from 'node:fs/promises';
import { KeyRing } from '../../api/auth.ts';
import { serverConfig } from '../../api/config.ts';
import type { ServerConfig } from '../../api/config.ts';
import type { DrainOutcome } from '../../app.ts';
import { FlowController } from '../../flow/flow-controller.ts';
import type { FlowLimits } from '../../flow/flow-core.ts';
import { SharedFlowController } from '../../flow/shared-flow-controller.ts';
import { RedisStore } from '../../flow/shared-store.ts';
import { EXIT_CODES, StartupError } from '../startup-errors.ts';
import type { FlowOptions, ServerOptions } from './front-door-options.ts';

export function serverConfigOf(f: ServerOptions, extra: Partial<ServerConfig> = {}): ServerConfig {
  if (f.probePort !== undefined && f.probePort !== 0 && f.probePort === f.port) throw new StartupError(`--probe-port: expected a port other than --port (${f.port})`);
  return namingFlags(() => serverConfig({
    host: f.host,
    port: f.port,
    probePort: f.probePort ?? null,
    sloMs: f.sloMs,
    minSloMs: f.minSloMs,
    maxSloMs: f.maxSloMs,
    maxOutputTokens: f.maxOutputTokens,
    bodyLimitBytes: f.bodyLimitBytes,
    drainTimeoutMs: f.drainTimeoutMs,
    headersTimeoutMs: f.headersTimeoutMs,
    requestTimeoutMs: f.requestTimeoutMs,
    keepAliveTimeoutMs: f.keepAliveTimeoutMs,
    maxConnections: f.maxConnections,
    maxConnectionsPerAddress: f.maxConnectionsPerAddress,
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

export function otelEndpointOf(f: ServerOptions): { otelEndpoint?: string } {
  return f.otelEndpoint === undefined ? {} : { otelEndpoint: f.otelEndpoint };
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

export function keysOf(f: ServerOptions): KeyRing | null {
  return KeyRing.load({ ...(f.apiKeyFile === undefined ? {} : { file: f.apiKeyFile }), ...(process.env.HEADROOM_API_KEYS === undefined ? {} : { env: process.env.HEADROOM_API_KEYS }) });
}

/** Flow control from its flags: absent when no cap is set (nothing to count against). */
export function flowOption(f: FlowOptions): { flow?: FlowController | SharedFlowController } {
  const cap = (n: number): number => n || Infinity;
  const maxRequests = cap(f.maxInflightRequests);
  const maxInputTokens = cap(f.maxInflightTokens);
  const maxTotalTokens = cap(f.maxInflightTotalTokens);
  // Checked whether or not a Redis URL is given: a bad value is an error where it is written.
  if (f.flowRedisTimeoutMs >= f.flowRedisLeaseMs) throw new StartupError(`--flow-redis-timeout-ms: expected less than --flow-redis-lease-ms (${f.flowRedisLeaseMs}), got '${f.flowRedisTimeoutMs}'`);
  try {
    const limits = { maxRequests, maxInputTokens, maxTotalTokens, shares: f.priorityBands, queueSize: f.flowQueueSize, queueTtlMs: f.flowQueueTtlMs };
    const on = maxRequests !== Infinity || maxInputTokens !== Infinity || maxTotalTokens !== Infinity;
    if (f.flowRedisUrl !== undefined) {
      if (!on) throw new StartupError('--flow-redis-url: set a cap to share (--max-inflight-requests, --max-inflight-tokens or --max-inflight-total-tokens)');
      return { flow: sharedFlow(f.flowRedisUrl, limits, f) };
    }
    const flow = new FlowController(limits);
    return on || f.priorityBands.length > 1 ? { flow } : {};
  } catch (err) {
    // FlowController's own checks (band shares that fall with the band) name the flag in their message.
    if (err instanceof StartupError) throw err;
    throw new StartupError((err as Error).message, { cause: err });
  }
}

function sharedFlow(url: string, limits: FlowLimits, f: FlowOptions): SharedFlowController {
  const store = new RedisStore({ url, leaseMs: f.flowRedisLeaseMs, timeoutMs: f.flowRedisTimeoutMs });
  return new SharedFlowController(limits, store, { replicas: f.flowReplicas, leaseMs: f.flowRedisLeaseMs, pollMs: f.flowRedisPollMs });
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
