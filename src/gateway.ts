// Wires the upstream pool, the picker, the ProxyBackend and the HTTP server into one Headroom
// process in gateway mode (app.ts is engine mode; the HTTP server is the same code).
//
// Lifecycle: listen first (a busy port fails at once), then probe every upstream. The API turns
// ready when the first upstream is healthy and has said what it serves (until then generation
// answers 503 `loading`, as an engine loading its model does); later ejections do not turn it back:
// requests then get 503 `no_upstream` with Retry-After. A drain refuses new requests and lets
// in-flight ones finish until the deadline; past it each remaining one is cut (a stream gets an SSE
// error event and [DONE]) and the server closes anyway.

import type { FastifyInstance } from 'fastify';
import type { AdmissionController } from './admission/controller.ts';
import type { AdmissionConfig } from './admission/factory.ts';
import { createAdmissionController } from './admission/factory.ts';
import { prepareDecisions } from './admission/rehearse.ts';
import { TraceWriter } from './admission/trace-writer.ts';
import { ActiveRequests } from './api/active-requests.ts';
import type { KeyRing } from './api/auth.ts';
import type { ServerConfig } from './api/config.ts';
import { ConnectionGuard } from './api/connections.ts';
import { ProbeListener, listenProbes } from './api/probe-listener.ts';
import type { LogDestination } from './api/logger.ts';
import type { Lifecycle } from './api/server.ts';
import { LISTEN_BACKLOG, buildServer } from './api/server.ts';
import { drainUntil } from './api/drain.ts';
import type { DrainOutcome } from './api/drain.ts';
import type { Clock } from './engine/clock.ts';
import { monotonicClock } from './engine/clock.ts';
import type { FlowControl } from './flow/flow-control.ts';
import { registerGatewayMetrics } from './obs/gateway-metrics.ts';
import type { ObservabilityOptions } from './obs/observability.ts';
import { Observability } from './obs/observability.ts';
import { Picker } from './proxy/picker.ts';
import type { PickerOptions } from './proxy/picker.ts';
import type { PoolOptions } from './proxy/pool.ts';
import { UpstreamPool } from './proxy/pool.ts';
import { ProxyBackend } from './proxy/proxy-backend.ts';
import type { ProxyOptions } from './proxy/proxy-backend.ts';
import { normalizeUpstreamUrl } from './proxy/upstream.ts';
import { NO_UPSTREAM_ACCESS } from './proxy/upstream-access.ts';
import type { UpstreamAccess } from './proxy/upstream-access.ts';

export interface GatewayOptions {
  /** Base URLs of the upstream OpenAI servers (http://host:port, with or without /v1). */
  readonly upstreams: readonly string[];
  readonly server: ServerConfig;
  readonly pool: Omit<PoolOptions, 'clock' | 'access'>;
  readonly picker: PickerOptions;
  readonly proxy: Omit<ProxyOptions, 'retryAfterS' | 'access'>;
  /** Credentials and TLS for every upstream (default: none, the system's CAs). */
  readonly access?: UpstreamAccess;
  /** Metrics (on unless `metrics: false`) and tracing (with `otelEndpoint`). */
  readonly obs?: Omit<ObservabilityOptions, 'sloMs' | 'modelName'>;
  readonly fdLimit?: number;
  readonly clock?: Clock;
  readonly keys?: KeyRing | null;
  readonly flow?: FlowControl;
  /** Admission control on the gateway's books of what is in flight upstream (off by default). */
  readonly admission?: AdmissionConfig | AdmissionController;
  /** Append one admission-trace row per request to this JSONL file. */
  readonly traceOut?: string;
  readonly logDestination?: LogDestination;
  readonly statsExtra?: () => Record<string, unknown>;
}

export class Gateway {
  readonly app: FastifyInstance;
  readonly lifecycle: Lifecycle = { warm: false };
  readonly active = new ActiveRequests();
  readonly connections: ConnectionGuard;
  /** The --probe-port listener; null without one. */
  readonly probes: ProbeListener | null;
  readonly backend: ProxyBackend;
  readonly admission: AdmissionController;
  readonly trace: TraceWriter | null;
  readonly #opts: GatewayOptions;
  #stopKeepWarm: (() => void) | null = null;
  #obs: Observability | null = null;
  #address = '';

  constructor(opts: GatewayOptions) {
    this.#opts = opts;
    const clock = opts.clock ?? monotonicClock;
    const urls = opts.upstreams.map(normalizeUpstreamUrl);
    const access = opts.access ?? NO_UPSTREAM_ACCESS;
    const pool = new UpstreamPool(urls, { ...opts.pool, clock, access });
    this.backend = new ProxyBackend(pool, new Picker(opts.picker), clock, { ...opts.proxy, access, retryAfterS: Math.max(opts.server.retryAfterS, Math.ceil(opts.pool.healthIntervalMs / 1000)) });
    const a = opts.admission ?? { mode: 'off' };
    this.admission = 'decide' in a ? a : createAdmissionController(a);
    this.trace = opts.traceOut === undefined ? null : new TraceWriter(opts.traceOut);
    const admission = this.admission;
    this.connections = new ConnectionGuard({ maxConnections: opts.server.maxConnections, maxConnectionsPerAddress: opts.server.maxConnectionsPerAddress, ...(opts.fdLimit === undefined ? {} : { fdLimit: opts.fdLimit }) });
    this.probes = opts.server.probePort === null ? null : new ProbeListener(opts.server.probePort, opts.server);
    this.app = buildServer({
      backend: () => (this.lifecycle.warm ? this.backend : null),
      config: opts.server,
      lifecycle: this.lifecycle,
      active: this.active,
      connections: this.connections,
      ...(this.probes === null ? {} : { probes: this.probes }),
      obs: () => this.#obs,
      metrics: opts.obs?.metrics !== false,
      loadingMessage: 'No upstream has answered its health probe yet; retry shortly.',
      ...(opts.keys == null ? {} : { keys: opts.keys }),
      ...(opts.flow === undefined ? {} : { flow: opts.flow }),
      admission,
      ...(this.trace === null ? {} : { trace: this.trace }),
      ...(opts.logDestination === undefined ? {} : { logDestination: opts.logDestination }),
      statsExtra: () => ({ admission: admission.state(), ...(opts.flow === undefined ? {} : { flow: opts.flow.state() }), ...opts.statsExtra?.() }),
    });
    pool.onHealthChange((u, from, to) => {
      const line = `upstream ${u.url}: ${from} → ${to}${u.failure === null ? '' : ` (${u.failure})`}`;
      if (to === 'ejected' || to === 'degraded') this.app.log.warn(line);
      else this.app.log.info(line);
      if (to === 'healthy') this.#warm();
    });
  }

  get obs(): Observability | null {
    return this.#obs;
  }

  /** Listen, then probe the upstreams (ready once one is healthy). Returns the bound address. */
  async start(): Promise<string> {
    const address = await this.listen();
    await this.backend.pool.start();
    return address;
  }

  async listen(): Promise<string> {
    this.#address = await this.app.listen({ host: this.#opts.server.host, port: this.#opts.server.port, backlog: LISTEN_BACKLOG, listenTextResolver: (a) => `listening at ${a}; probing ${this.#opts.upstreams.length} upstreams` });
    await listenProbes(this.app, this.probes, this.#opts.server.host);
    return this.#address;
  }

  /** Readiness off, refuse new requests, let in-flight ones finish until `deadlineMs`; past it, cut the rest. Then close. */
  async drain(deadlineMs = this.#opts.server.drainTimeoutMs): Promise<DrainOutcome> {
    const backend = this.backend;
    backend.startDrain();
    const outcome = await drainUntil(deadlineMs, { log: this.app.log, active: this.active, stop: () => backend.whenIdle(), whenIdle: () => backend.whenIdle() });
    await this.close();
    return outcome;
  }

  async close(): Promise<void> {
    this.#stopKeepWarm?.();
    await this.probes?.close();
    const closing = this.app.close();
    this.app.server.closeAllConnections();
    await closing;
    await this.backend.close();
    await this.#obs?.close();
    await this.trace?.close();
    await this.#opts.flow?.close?.();
  }

  /** The first healthy upstream: metrics start (labelled with its model) and the API turns ready. */
  #warm(): void {
    if (this.lifecycle.warm) return;
    const opts = this.#opts;
    const modelName = this.backend.models()[0] ?? 'unknown';
    this.#obs = new Observability(null, {
      sloMs: opts.server.sloMs,
      modelName,
      ...(opts.keys == null ? {} : { tenants: opts.keys.tenants() }),
      ...(opts.flow === undefined ? {} : { flow: opts.flow }),
      ...opts.obs,
    });
    if (this.#obs.metrics !== null) registerGatewayMetrics(this.#obs.metrics.registry, this.backend);
    // As in engine mode: the decision path compiled before the first real request (rehearse.ts),
    // on the first upstream's books (every upstream's are the same code).
    const load = this.backend.books[0]!;
    const clock = this.backend.clock;
    this.#stopKeepWarm = prepareDecisions(this.admission, opts.admission, { sloMs: opts.server.sloMs, now: () => clock.nowMs(), snapshot: (fresh) => load.snapshot(fresh) });
    this.lifecycle.warm = true;
    this.app.log.info(`gateway for ${this.backend.models().join(', ')} on ${this.#address}; ready`);
  }
}
