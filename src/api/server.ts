// The HTTP front door: routes, body parsing, connection and time bounds, and the one place errors
// become responses.
//
//   POST /v1/chat/completions, POST /v1/completions, POST /v1/responses   generation (SSE or JSON)
//   GET  /v1/models                                   the served model
//   POST /v1/embeddings                               engine mode: not served, 404 model_not_found (unsupported.ts); gateway: forwarded
//   POST /tokenize, POST /detokenize, GET /version    vLLM's utility endpoints (tokenize.ts)
//   GET  /health    liveness: 200 while the process can serve (loading and draining included), 503 once its engine failed
//   GET  /ready     readiness: 503 until the model is loaded and warm, from the moment a drain starts, and after a failure
//   GET  /stats     a JSON snapshot of engine state and configuration
//   GET  /metrics   Prometheus exposition (Headroom and vLLM-compatible names), when metrics are on
//   GET  /dashboard, /dashboard/data, /dashboard/runs   the live and recorded-run dashboard (obs/dashboard-routes.ts)
//
// With --probe-port, /health, /ready and /metrics are also served on a port of their own
// (probe-listener.ts), through these same routes and hooks; every other path is 404 there.
//
// Around every route (hooks): a request id (request-id.ts) returned as `x-request-id` on every
// response; one log line when the response is over (request-log.ts); with API keys, a 401 before
// the body is read unless the path is open (/health, /ready, /metrics, /dashboard*) or it is a CORS preflight
// (auth.ts); CORS headers when origins are configured (cors.ts).
//
// Invariants:
// - Every response that is not a success has the OpenAI error shape, HTTP-layer ones included
//   (http-errors.ts); a wrong method on a known path is 405 with an Allow header.
// - No client holds a connection past the header, request or keep-alive timeout, and connections
//   are bounded in total and per address (connections.ts); /health and /ready stay answerable.
// - The server listens before the model loads: until then generation answers 503 `loading`.
// - Every response a route, a hook or the 404 handler sends carries `x-request-id` and is logged
//   once; the socket-level errors of http-errors.ts (no request was parsed) have no id and log a
//   `client error` line instead.

import Fastify, { LogController } from 'fastify';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { AdmissionController } from '../admission/controller.ts';
import { admitAll } from '../admission/controller.ts';
import type { TraceWriter } from '../admission/trace-writer.ts';
import type { AnyBackend, Backend, ForwardingBackend } from '../backend/backend.ts';
import { isForwarding } from '../backend/backend.ts';
import type { FlowControl } from '../flow/flow-control.ts';
import { noFlowControl } from '../flow/flow-control.ts';
import type { ActiveRequests } from './active-requests.ts';
import { CompletionsHandler } from './completions.ts';
import { ForwardHandler } from './forward-handler.ts';
import type { FrontDoor } from './request-call.ts';
import { runCall } from './request-call.ts';
import { responsesSurface } from './responses.ts';
import { chatSurface, completionSurface } from './surface.ts';
import type { Surface } from './surface.ts';
import { detokenize, tokenize, version } from './tokenize.ts';
import { embeddingsNotServed } from './unsupported.ts';
import type { IdSource } from './ids.ts';
import { randomIds } from './ids.ts';
import type { ServerConfig } from './config.ts';
import type { ConnectionGuard } from './connections.ts';
import type { ProbeListener } from './probe-listener.ts';
import { PROBE_PORT_PATHS } from './probe-listener.ts';
import { ApiError } from './errors.ts';
import { RequestError } from '../util/request-error.ts';
import { handleClientError } from './http-errors.ts';
import { checkRawMessageCount, sizeFacts } from './limits.ts';
import { LARGE_BODY_BYTES, OnePerTurn } from './one-per-turn.ts';
import type { Observability } from '../obs/observability.ts';
import type { DashboardDeps } from '../obs/dashboard-routes.ts';
import { DASHBOARD_PATHS, dashboardData, dashboardPage, dashboardRuns } from '../obs/dashboard-routes.ts';
import type { KeyRing } from './auth.ts';
import { registerCors } from './cors.ts';
import type { LogDestination } from './logger.ts';
import { loggerOptions } from './logger.ts';
import { REQUEST_ID_HEADER, requestIdFrom } from './request-id.ts';
import { logRequest, newFacts } from './request-log.ts';

export interface Lifecycle {
  /** The engine has run its warm-up step. */
  warm: boolean;
}

export interface ServerDeps {
  /** What generation answers (503 `loading`) while the backend is null; the model's loading by default. */
  readonly loadingMessage?: string;
  /** The backend, once the model is loaded and warm (gateway: once an upstream answers); null until then. */
  readonly backend: () => AnyBackend | null;
  readonly config: ServerConfig;
  readonly lifecycle: Lifecycle;
  /** Generation requests in flight, for the drain deadline. */
  readonly active: ActiveRequests;
  readonly connections: ConnectionGuard;
  /** The probe port's listener (--probe-port), served through this app's routes; absent = none. */
  readonly probes?: ProbeListener;
  /** Extra facts for /stats (runner kind notes, build info). */
  readonly statsExtra?: () => Record<string, unknown>;
  /** Metrics and tracing, once the engine exists; absent = neither. */
  readonly obs?: () => Observability | null;
  /** Serve /metrics (default true when `obs` is given). */
  readonly metrics?: boolean;
  /** Response ids and default seeds (default random). */
  readonly ids?: IdSource;
  readonly flow?: FlowControl;
  readonly admission?: AdmissionController;
  /** Admission traces (`--trace-out`). */
  readonly trace?: TraceWriter;
  /** API keys; absent = the API is open and every caller is tenant `default`. */
  readonly keys?: KeyRing | null;
  /** Where log lines go (default stdout). */
  readonly logDestination?: LogDestination;
  /** Serve /dashboard (engine mode); absent = not served. */
  readonly dashboard?: DashboardDeps;
}

const utf8 = new TextDecoder('utf-8', { fatal: true });
/**
 * Pending TCP handshakes the kernel queues for the listening socket (it caps this at
 * net.core.somaxconn). Node's default of 511 made a 20,000-connection burst drop over 100,000
 * handshakes, and /health probes waited behind them (results/burst/README.md).
 */
export const LISTEN_BACKLOG = 4096;
/** Paths answered even on an overflow connection (connections.ts). */
const PROBES = new Set(['/health', '/ready']);
/** Paths polled by machines (orchestrator probes, the Prometheus scrape): logged at debug. */
const PROBE_LOG_PATHS = new Set([...PROBES, '/metrics', '/dashboard/data']);
/** node's check of header and request timeouts runs on an interval; a quarter of the shortest bound keeps it timely. */
const MAX_CHECK_INTERVAL_MS = 1000;

export function buildServer(deps: ServerDeps): FastifyInstance {
  const { config, lifecycle } = deps;
  const app = Fastify({
    bodyLimit: config.bodyLimitBytes,
    logger: loggerOptions(config.logLevel, config.logFormat, deps.logDestination),
    // One line per request, written by our own hook when the response is over (request-log.ts).
    logController: new LogController({ disableRequestLogging: true, requestIdLogLabel: 'request_id' }),
    requestIdHeader: false,
    genReqId: (req) => requestIdFrom(req.headers[REQUEST_ID_HEADER]),
    return503OnClosing: false,
    // Timeouts: headers and the whole request (slow or silent bodies), idle keep-alive. No socket
    // inactivity timeout: a queued request or a slow stream is legitimately quiet for a while.
    requestTimeout: config.requestTimeoutMs,
    keepAliveTimeout: config.keepAliveTimeoutMs,
    connectionTimeout: 0,
    http: {
      headersTimeout: config.headersTimeoutMs,
      connectionsCheckingInterval: Math.max(10, Math.min(MAX_CHECK_INTERVAL_MS, Math.floor(config.headersTimeoutMs / 4))),
    },
    // Below the routes there is no request (no id, no route): one warn line with what was answered.
    clientErrorHandler: function (this: FastifyInstance, err, socket) {
      const e = handleClientError(err, socket);
      if (e !== null) this.log.warn({ status: e.status, outcome: e.code === 'request_timeout' ? 'timeout' : 'error', code: e.code, remote: socket.remoteAddress ?? null }, 'client error');
    },
    frameworkErrors: (err, req, reply: FastifyReply) => {
      track(req, reply);
      sendError(req, reply, new ApiError('bad_request', `The request could not be routed: ${err.message}`));
    },
  });
  deps.connections.attach(app.server, (msg) => app.log.warn(msg), config.retryAfterS);
  const probes = deps.probes ?? null;
  probes?.attach(app);
  app.decorateRequest('facts', null as unknown as FastifyRequest['facts']);
  const obs = (): Observability | null => deps.obs?.() ?? null;

  /** Give the request its facts, its id header and its log line (once). */
  const track = (req: FastifyRequest, reply: FastifyReply): void => {
    if (hasFacts(req)) return;
    req.facts = newFacts(performance.now());
    void reply.header(REQUEST_ID_HEADER, req.id);
    reply.raw.once('close', () => {
      const outcome = logRequest(req, reply, { logPrompts: config.logPrompts, probe: PROBE_LOG_PATHS.has(req.url.split('?')[0]!) });
      obs()?.metrics?.apiRequest(req.facts.caller.tenant, outcome);
    });
  };

  app.addHook('onRequest', (req, reply, done) => {
    track(req, reply);
    if (probes !== null && probes.owns(req.raw.socket) && !PROBE_PORT_PATHS.has(req.url.split('?')[0]!)) {
      sendError(req, reply, new ApiError('route_not_found', `The probe port serves only ${[...PROBE_PORT_PATHS].join(', ')}; ${req.method} ${req.url.split('?')[0]!.slice(0, 200)} is on the API port.`));
      return;
    }
    if (deps.connections.isOverflow(req.raw.socket)) {
      void reply.header('connection', 'close');
      if (!PROBES.has(req.url.split('?')[0]!)) {
        sendError(req, reply, deps.connections.refusal(config.retryAfterS));
        return;
      }
    }
    done();
  });

  // API keys, before the body is read: an unknown caller costs no parsing. Probes need none, nor
  // the scrape and the dashboard unless --protect-metrics (else keep them on a private network).
  const openPaths = new Set(config.protectMetrics ? PROBES : [...PROBES, '/metrics', ...DASHBOARD_PATHS]);
  const keys = deps.keys ?? null;
  if (keys !== null) {
    app.addHook('preParsing', (req, reply, payload, done) => {
      if (req.method === 'OPTIONS' || openPaths.has(req.url.split('?')[0]!)) {
        done(null, payload);
        return;
      }
      const auth = keys.authenticate(req.headers);
      if (!auth.ok) {
        obs()?.metrics?.authFailed();
        void reply.header('www-authenticate', 'Bearer');
        sendError(req, reply, auth.error);
        return;
      }
      req.facts.caller = auth.caller;
      done(null, payload);
    });
  }
  registerCors(app, config.corsOrigins);

  // JSON bodies: reject invalid UTF-8 instead of silently turning it into U+FFFD.
  app.removeAllContentTypeParsers();
  // A large body's decode and parse are synchronous (10-30 ms for 1 MB on a slow 2-core machine):
  // large bodies are parsed one per turn of the event loop, so three arriving together do not keep
  // /health and every stream waiting for all three (test/api/freeze.test.ts).
  const largeBodies = new OnePerTurn();
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (req, body: Buffer, done) => {
    if (body.length < LARGE_BODY_BYTES) parseJsonBody(req, body, done);
    else
      largeBodies.run(() => {
        try {
          parseJsonBody(req, body, done);
        } catch (e) {
          done(e instanceof Error ? e : new Error(String(e)));
        }
      });
  });
  const parseJsonBody = (req: FastifyRequest, body: Buffer, done: (err: Error | null, value?: unknown) => void): void => {
    const backend = deps.backend();
    // Gateway mode forwards the body byte for byte: keep it.
    if (backend !== null && isForwarding(backend)) req.rawBody = body;
    else if (backend !== null && req.url.split('?')[0] === '/v1/chat/completions') {
      try {
        checkRawMessageCount(sizeFacts(backend), body);
      } catch (e) {
        done(e as ApiError, undefined);
        return;
      }
    }
    let text: string;
    try {
      text = utf8.decode(body);
    } catch {
      done(new ApiError('invalid_encoding', 'The request body is not valid UTF-8.'), undefined);
      return;
    }
    if (text.trim().length === 0) {
      done(new ApiError('invalid_json', 'The request body is empty; expected a JSON object.'), undefined);
      return;
    }
    let value: unknown;
    try {
      value = JSON.parse(text) as unknown;
    } catch (e) {
      done(new ApiError('invalid_json', `The request body is not valid JSON: ${(e as Error).message}`), undefined);
      return;
    }
    done(null, value);
  };

  app.setErrorHandler((err: FastifyError | RequestError, req, reply) => {
    const api = toApiError(err);
    // A bug, not a client's mistake: its stack goes to the log (the client sees internal_error only).
    if (api.code === 'internal_error') req.log.error({ err }, 'unhandled error in a handler');
    sendError(req, reply, api);
  });

  const methods = new Map<string, string[]>();
  const route = (method: 'GET' | 'POST', path: string, handler: (req: FastifyRequest, reply: FastifyReply) => unknown): void => {
    methods.set(path, [...(methods.get(path) ?? []), ...(method === 'GET' ? ['GET', 'HEAD'] : ['POST'])]);
    app.route({ method, url: path, handler: handler });
  };
  app.setNotFoundHandler((req, reply) => {
    const path = req.url.split('?')[0]!;
    const allowed = methods.get(path);
    const e = allowed === undefined
      ? new ApiError('route_not_found', `No route for ${req.method} ${path.slice(0, 200)}.`)
      : new ApiError('method_not_allowed', `${path} does not accept ${req.method}; use ${allowed.join(' or ')}.`);
    if (allowed !== undefined) void reply.header('allow', allowed.join(', '));
    sendError(req, reply, e);
  });

  const loaded = (): AnyBackend => {
    const backend = deps.backend();
    if (backend === null) throw new ApiError('loading', deps.loadingMessage ?? 'The model is still loading; retry shortly.', { retryAfterS: config.retryAfterS });
    return backend;
  };
  /** Engine mode's backend; in gateway mode the route does not exist (no tokenizer here). */
  const generating = (path: string): Backend => {
    const backend = loaded();
    if (isForwarding(backend)) throw new ApiError('route_not_found', `${path} is not served in gateway mode: the gateway has no tokenizer; ask an upstream.`);
    return backend;
  };
  // Both modes run a request through the front door's one set of shared steps (request-call.ts);
  // engine mode's handler supplies prepare and generate, gateway mode's pick and pipe.
  let front: FrontDoor | null = null;
  let completions: CompletionsHandler | null = null;
  let forwarding: ForwardHandler | null = null;
  const door = (backend: Backend | ForwardingBackend): FrontDoor =>
    (front ??= { config, clock: backend.clock, flow: deps.flow ?? noFlowControl, admission: deps.admission ?? admitAll, obs: obs(), trace: deps.trace ?? null, active: deps.active });
  const forwarder = (backend: ForwardingBackend): ForwardHandler => (forwarding ??= new ForwardHandler(door(backend), backend));
  const handler = (backend: Backend): CompletionsHandler => (completions ??= new CompletionsHandler({ door: door(backend), backend, ids: deps.ids ?? randomIds, models: servedModels(config, backend) }));
  const serve = (endpoint: 'chat' | 'completion' | 'responses', surface: Surface, req: FastifyRequest, reply: FastifyReply): Promise<void> => {
    const backend = loaded();
    return runCall(door(backend), req, reply, (call) => (isForwarding(backend) ? forwarder(backend).run(call, endpoint, req, reply) : handler(backend).run(call, surface, req, reply)));
  };
  route('POST', '/v1/chat/completions', (req, reply) => serve('chat', chatSurface, req, reply));
  route('POST', '/v1/completions', (req, reply) => serve('completion', completionSurface, req, reply));
  route('POST', '/v1/responses', (req, reply) => serve('responses', responsesSurface, req, reply));
  route('POST', '/v1/embeddings', (req, reply) => {
    const backend = loaded();
    if (!isForwarding(backend)) throw embeddingsNotServed();
    return runCall(door(backend), req, reply, (call) => forwarder(backend).passThrough(call, req, reply));
  });
  route('POST', '/tokenize', (req) => tokenize(generating('/tokenize'), servedModels(config, loaded()), req.body));
  route('POST', '/detokenize', (req) => detokenize(generating('/detokenize'), servedModels(config, loaded()), req.body));
  route('GET', '/version', () => version());
  route('GET', '/v1/models', () => {
    const backend = loaded();
    const ctx = backend.info.contextTokens;
    const data = servedModels(config, backend).map((id) => ({ id, object: 'model', created: 0, owned_by: 'headroom', root: isForwarding(backend) ? id : backend.info.modelId, ...(ctx > 0 ? { max_model_len: ctx } : {}) }));
    return { object: 'list', data };
  });
  route('GET', '/health', (_req, reply) => {
    const backend = deps.backend();
    if (backend === null) return { status: 'ok', loading: true, draining: false, failure: null };
    const h = backend.health();
    return reply.code(h.ok ? 200 : 503).send({ status: h.ok ? 'ok' : 'failed', loading: false, draining: h.draining, failure: h.failure });
  });
  route('GET', '/ready', (_req, reply) => {
    const backend = deps.backend();
    const h = backend?.health() ?? null;
    const draining = h?.draining ?? false;
    const serving = h !== null && (h.serving ?? h.ok);
    const ready = h !== null && h.ok && serving && lifecycle.warm && !draining;
    if (!ready) void reply.header('retry-after', String(config.retryAfterS));
    return reply.code(ready ? 200 : 503).send({ ready, loading: backend === null, warm: lifecycle.warm, draining, serving });
  });
  route('GET', '/stats', () => {
    const backend = deps.backend();
    const connections = deps.connections.stats();
    const probePort = probes === null ? {} : { probes: probes.address };
    if (backend === null) return { loading: true, config, connections, ...probePort };
    return { mode: backend.info.mode, ...backend.stats(), config, connections, ...probePort, ...deps.statsExtra?.() };
  });
  if (deps.obs !== undefined && deps.metrics !== false) {
    route('GET', '/metrics', async (_req, reply) => {
      const metrics = obs()?.metrics ?? null;
      if (metrics === null) throw new ApiError('loading', 'Metrics start once the server is ready.', { retryAfterS: config.retryAfterS });
      return reply.header('content-type', metrics.contentType).send(await metrics.text());
    });
  }
  const dashboard = deps.dashboard;
  if (dashboard !== undefined) {
    route('GET', '/dashboard', (_req, reply) => reply.header('content-type', 'text/html; charset=utf-8').header('cache-control', 'no-store').send(dashboardPage()));
    route('GET', '/dashboard/data', (req) => dashboardData(dashboard, (req.query as Record<string, unknown>)['run'], config.retryAfterS));
    route('GET', '/dashboard/runs', () => dashboardRuns(dashboard));
  }
  return app;
}

/** Every error response: the catalog's status and body, Retry-After on refusals, the code in the log line. */
function sendError(req: FastifyRequest, reply: FastifyReply, e: ApiError): void {
  if (hasFacts(req)) req.facts.errorCode = e.code;
  if (e.retryAfterS !== null) void reply.header('retry-after', String(e.retryAfterS));
  void reply.code(e.status).send(e.toBody());
}

/** Whether a request got its facts yet (a request fastify could not route never reached onRequest). */
function hasFacts(req: FastifyRequest): boolean {
  return (req.facts as FastifyRequest['facts'] | null | undefined) != null;
}

/** The names the model answers to: the configured aliases, else the backend's own id (gateway: what the healthy upstreams serve). */
function servedModels(config: ServerConfig, backend: AnyBackend): readonly string[] {
  if (isForwarding(backend)) return backend.models();
  return config.servedModelNames.length > 0 ? config.servedModelNames : [backend.info.modelId];
}

/**
 * Map anything thrown in a handler to a catalog entry; a client's mistake is never a 500. A
 * RequestError from a layer under the API (flow/, obs/) keeps its code, message, param and Retry-After.
 */
function toApiError(err: FastifyError | RequestError): ApiError {
  if (err instanceof RequestError) return ApiError.of(err);
  switch (err.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new ApiError('body_too_large', 'The request body is larger than this server accepts.');
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new ApiError('unsupported_media_type', 'Send the request body as application/json.');
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new ApiError('invalid_json', 'The request body is empty; expected a JSON object.');
  }
  if (err.statusCode !== undefined && err.statusCode >= 400 && err.statusCode < 500) {
    return new ApiError('invalid_value', err.message);
  }
  return new ApiError('internal_error', 'The server failed to handle this request.');
}
