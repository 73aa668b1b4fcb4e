// The HTTP front door: routes, body parsing, and the one place errors become responses.
//
//   POST /v1/chat/completions, POST /v1/completions   generation (SSE or JSON)
//   GET  /v1/models                                   the served model
//   GET  /health    liveness: 200 while the backend can serve (draining included), 503 once its engine failed
//   GET  /ready     readiness: 503 until the engine is warm, from the moment a drain starts, and after a failure
//   GET  /stats     a JSON snapshot of engine state and configuration
//   GET  /metrics   Prometheus exposition (Headroom and vLLM-compatible names), when metrics are on

import Fastify from 'fastify';
import type { FastifyError, FastifyInstance } from 'fastify';
import type { AdmissionController } from '../admission/controller.ts';
import type { TraceWriter } from '../admission/trace-writer.ts';
import { admitAll } from '../admission/controller.ts';
import type { Backend } from '../backend/backend.ts';
import type { FlowControl } from '../flow/flow-control.ts';
import { noFlowControl } from '../flow/flow-control.ts';
import { CompletionsHandler } from './completions.ts';
import type { IdSource } from './ids.ts';
import { randomIds } from './ids.ts';
import type { ServerConfig } from './config.ts';
import { ApiError } from './errors.ts';
import type { Observability } from '../obs/observability.ts';

export interface Lifecycle {
  /** The engine has run its warm-up step. */
  warm: boolean;
}

export interface ServerDeps {
  readonly backend: Backend;
  readonly config: ServerConfig;
  readonly lifecycle: Lifecycle;
  /** Extra facts for /stats (runner kind notes, build info). */
  readonly statsExtra?: () => Record<string, unknown>;
  /** Metrics and tracing; absent = neither. */
  readonly obs?: Observability;
  /** Response ids and default seeds (default random). */
  readonly ids?: IdSource;
  readonly flow?: FlowControl;
  readonly admission?: AdmissionController;
  /** Admission traces (`--trace-out`). */
  readonly trace?: TraceWriter;
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

export function buildServer(deps: ServerDeps): FastifyInstance {
  const { backend, config, lifecycle } = deps;
  const app = Fastify({ bodyLimit: config.bodyLimitBytes, logger: false, return503OnClosing: false });

  // JSON bodies: reject invalid UTF-8 instead of silently turning it into U+FFFD.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (_req, body: Buffer, done) => {
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
    try {
      done(null, JSON.parse(text) as unknown);
    } catch (e) {
      done(new ApiError('invalid_json', `The request body is not valid JSON: ${(e as Error).message}`), undefined);
    }
  });

  app.setErrorHandler((err: FastifyError | ApiError, _req, reply) => {
    const api = toApiError(err);
    if (api.retryAfterS !== null) void reply.header('retry-after', String(api.retryAfterS));
    void reply.code(api.status).send(api.toBody());
  });
  app.setNotFoundHandler((req, reply) => {
    const e = new ApiError('route_not_found', `No route for ${req.method} ${req.url.split('?')[0]}.`);
    void reply.code(e.status).send(e.toBody());
  });

  const completions = new CompletionsHandler({
    backend,
    config,
    ids: deps.ids ?? randomIds,
    flow: deps.flow ?? noFlowControl,
    admission: deps.admission ?? admitAll,
    obs: deps.obs ?? null,
    trace: deps.trace ?? null,
  });
  app.post('/v1/chat/completions', (req, reply) => completions.handle('chat', req, reply));
  app.post('/v1/completions', (req, reply) => completions.handle('completion', req, reply));
  app.get('/v1/models', () => ({
    object: 'list',
    data: [{ id: backend.info.modelId, object: 'model', created: 0, owned_by: 'headroom', max_model_len: backend.info.contextTokens }],
  }));
  app.get('/health', (_req, reply) => {
    const h = backend.health();
    return reply.code(h.ok ? 200 : 503).send({ status: h.ok ? 'ok' : 'failed', draining: h.draining, failure: h.failure });
  });
  app.get('/ready', (_req, reply) => {
    const h = backend.health();
    const ready = lifecycle.warm && h.ok && !h.draining;
    if (!ready) void reply.header('retry-after', String(config.retryAfterS));
    return reply.code(ready ? 200 : 503).send({ ready, warm: lifecycle.warm, draining: h.draining });
  });
  app.get('/stats', () => ({
    mode: backend.info.mode,
    ...backend.stats(),
    config,
    ...deps.statsExtra?.(),
  }));
  const metrics = deps.obs?.metrics ?? null;
  if (metrics !== null) {
    app.get('/metrics', async (_req, reply) => reply.header('content-type', metrics.contentType).send(await metrics.text()));
  }
  return app;
}

/** Map anything thrown in a handler to a catalog entry; a client's mistake is never a 500. */
function toApiError(err: FastifyError | ApiError): ApiError {
  if (err instanceof ApiError) return err;
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
