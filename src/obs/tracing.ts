// OpenTelemetry traces, off by default: one span per request with its phases as children,
//
//   headroom.request  [arrival ─────────────────────────────────────────── finish]
//     queue           [arrival ── scheduled]
//     prefill                    [scheduled ── first token]
//     decode                                [first token ───────────────── finish]
//
// exported over OTLP/HTTP (JSON) through a batch processor.
//
// The spans are built after the fact, when the request finishes, from its timeline record
// (arrivalMs, scheduledMs, firstTokenMs, finishedMs). Nothing runs per token or per
// step, so while a request decodes tracing costs it nothing; what is left is a few span objects
// per finished request and the exporter's periodic POST (measured in bench/obs/tracing-cost.ts).
// A phase that never began is absent (an abort in the queue has only `queue`). A caller's W3C
// `traceparent` header, when present and valid, becomes the request span's parent. The HTTP
// request id (`x-request-id`, the id in the request log line) is the span's `http.request_id`.

import type { Attributes, Context, Span, Tracer } from '@opentelemetry/api';
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, TraceFlags, trace } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import type { NodeTracerConfig, SpanExporter } from '@opentelemetry/sdk-trace-node';
import { BatchSpanProcessor, NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import type { RefusalReason } from '../backend/refusal.ts';
import type { FinishReason, RequestTimeline } from '../engine/outputs.ts';

export interface TracingOptions {
  /** OTLP/HTTP collector: a base URL (`http://host:4318`, `/v1/traces` is appended) or the full traces URL. */
  readonly endpoint: string;
  readonly serviceName?: string;
  /** Longest wait before a batch is sent, ms (the SDK's default is 5000). */
  readonly exportDelayMs?: number;
  /** Tests and benchmarks may swap the exporter. */
  readonly exporter?: SpanExporter;
}

type Resource = NonNullable<NodeTracerConfig['resource']>;

export class RequestTracer {
  readonly #provider: NodeTracerProvider;
  readonly #tracer: Tracer;

  constructor(opts: TracingOptions) {
    const exporter = opts.exporter ?? new OTLPTraceExporter({ url: tracesUrl(opts.endpoint) });
    this.#provider = new NodeTracerProvider({
      resource: staticResource({ 'service.name': opts.serviceName ?? 'headroom' }),
      spanProcessors: [new BatchSpanProcessor(exporter, { scheduledDelayMillis: opts.exportDelayMs ?? 5000 })],
    });
    this.#tracer = this.#provider.getTracer('headroom');
  }

  /** A finished request: the request span and its phases. Times are engine ms (performance.now()). */
  finished(req: RequestTimeline, reason: FinishReason, traceparent?: string, httpRequestId?: string): void {
    const end = req.finishedMs ?? performance.now();
    const root = this.#root(req, traceparent, httpRequestId, { 'headroom.finish_reason': reason, 'gen_ai.usage.output_tokens': req.numOutputTokens, 'headroom.cached_tokens': req.numCachedTokens, 'headroom.preemptions': req.numPreemptions });
    if (reason === 'error') root.setStatus({ code: SpanStatusCode.ERROR });
    const ctx = trace.setSpan(ROOT_CONTEXT, root);
    const admitted = req.scheduledMs;
    const first = req.firstTokenMs;
    this.#phase('queue', ctx, req.arrivalMs, admitted ?? end);
    if (admitted !== null) this.#phase('prefill', ctx, admitted, first ?? end);
    if (first !== null) this.#phase('decode', ctx, first, end);
    root.end(epochMs(end));
  }

  /** A refused request: the request span alone, marked with the reason. */
  refused(req: RequestTimeline, reason: RefusalReason, traceparent?: string, httpRequestId?: string): void {
    const root = this.#root(req, traceparent, httpRequestId, { 'headroom.refusal_reason': reason });
    root.setStatus({ code: SpanStatusCode.ERROR, message: `refused: ${reason}` });
    root.end(epochMs(performance.now()));
  }

  /** Send what is buffered now (tests, and before exit). */
  flush(): Promise<void> {
    return this.#provider.forceFlush();
  }

  shutdown(): Promise<void> {
    return this.#provider.shutdown();
  }

  #root(req: RequestTimeline, traceparent: string | undefined, httpRequestId: string | undefined, extra: Attributes): Span {
    const attributes: Attributes = { 'headroom.request_id': req.requestId, ...(httpRequestId === undefined ? {} : { 'http.request_id': httpRequestId }), 'gen_ai.usage.input_tokens': req.numPromptTokens, 'headroom.max_tokens': req.maxTokens, 'headroom.slo_ms': req.deadlineMs - req.arrivalMs, ...extra };
    return this.#tracer.startSpan('headroom.request', { kind: SpanKind.SERVER, startTime: epochMs(req.arrivalMs), attributes }, parentContext(traceparent));
  }

  #phase(name: string, ctx: Context, startMs: number, endMs: number): void {
    this.#tracer.startSpan(name, { startTime: epochMs(startMs) }, ctx).end(epochMs(Math.max(startMs, endMs)));
  }
}

/** Engine time (performance.now() ms) → epoch ms. */
const epochMs = (ms: number): number => performance.timeOrigin + ms;

export function tracesUrl(endpoint: string): string {
  let u: URL;
  try {
    u = new URL(endpoint);
  } catch {
    throw new Error(`tracing: expected an http(s) URL for the OTLP endpoint, got '${endpoint}'`);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error(`tracing: expected an http(s) URL for the OTLP endpoint, got '${endpoint}'`);
  if (u.pathname === '/' || u.pathname === '') u.pathname = '/v1/traces';
  return u.toString();
}

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/** A W3C traceparent header → a remote parent context (ROOT when absent or malformed). */
function parentContext(header: string | undefined): Context {
  const m = header === undefined ? null : TRACEPARENT.exec(header.trim());
  if (m === null || /^0+$/.test(m[1]!) || /^0+$/.test(m[2]!)) return ROOT_CONTEXT;
  const flags = parseInt(m[3]!, 16) & TraceFlags.SAMPLED;
  return trace.setSpanContext(ROOT_CONTEXT, { traceId: m[1]!, spanId: m[2]!, traceFlags: flags, isRemote: true });
}

/** A fixed resource (the SDK's Resource interface, without depending on @opentelemetry/resources). */
function staticResource(attributes: Attributes): Resource {
  const r: Resource = {
    attributes,
    merge: (other) => (other === null ? r : staticResource({ ...attributes, ...other.attributes })),
    getRawAttributes: () => Object.entries(attributes),
  };
  return r;
}
