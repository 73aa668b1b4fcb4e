// What the rest of Headroom sees of obs/: one object per server, attached to the engine's step
// hook (engine mode; gateway mode has no engine, and the API measures what it forwards), told by
// the API about admission decisions, refusals and finishes. Metrics are on by default; tracing only
// with an OTLP endpoint. It records, it never decides. Run listeners (the flight recorder, the live
// dashboard) get the same events: every step, decision, refusal and finish.

import type { Engine } from '../engine/engine.ts';
import type { RefusalReason } from '../backend/refusal.ts';
import type { FinishReason, RequestTimeline } from '../engine/outputs.ts';
import type { FlowControl } from '../flow/flow-control.ts';
import type { DecisionEvent, RunListener } from './run-listener.ts';
import { Metrics } from './metrics.ts';
import { StepMetrics } from './step-observer.ts';
import type { TracingOptions } from './tracing.ts';
import { RequestTracer } from './tracing.ts';

export interface ObservabilityOptions {
  /** Default SLO of the server (histogram buckets are built around it). */
  readonly sloMs: number;
  /** Serve /metrics (default true). */
  readonly metrics?: boolean;
  /** Export OpenTelemetry spans to this OTLP/HTTP collector; absent = tracing off. */
  readonly otelEndpoint?: string;
  /** Extra tracing settings (tests: exporter, export delay). */
  readonly tracing?: Omit<TracingOptions, 'endpoint'>;
  /** Node process metrics on /metrics (default true). */
  readonly processMetrics?: boolean;
  /** `model_name` on the vLLM-compatible series (default: the runner's model id; serve: the first served name; required without an engine). */
  readonly modelName?: string;
  /** Every tenant a request can come from (the API keys'; default just `default`): the tenant label's values. */
  readonly tenants?: readonly string[];
  /** Flow control, whose decisions and state the metrics report (default: none reported). */
  readonly flow?: FlowControl;
}

export class Observability {
  readonly metrics: Metrics | null;
  readonly tracer: RequestTracer | null;
  readonly #engine: Engine | null;
  readonly #listeners: RunListener[] = [];

  /** `engine`: null in gateway mode (no engine gauges, no step observer). */
  constructor(engine: Engine | null, opts: ObservabilityOptions) {
    this.#engine = engine;
    const modelName = opts.modelName ?? engine?.runner.info.modelId;
    if (modelName === undefined) throw new Error('Observability: expected a modelName without an engine');
    this.metrics =
      opts.metrics === false
        ? null
        : new Metrics({
            sloMs: opts.sloMs,
            modelName,
            ...(engine === null ? {} : { stats: () => engine.stats() }),
            ...(opts.processMetrics === undefined ? {} : { processMetrics: opts.processMetrics }),
            ...(opts.tenants === undefined ? {} : { tenants: opts.tenants }),
            ...(opts.flow === undefined ? {} : { flow: opts.flow }),
          });
    if (this.metrics !== null && engine !== null) engine.onStep(new StepMetrics(this.metrics).onStep);
    this.tracer = opts.otelEndpoint === undefined ? null : new RequestTracer({ endpoint: opts.otelEndpoint, ...opts.tracing });
  }

  /** Tell `l` about every step (engine mode), decision, refusal and finish from now on. */
  addListener(l: RunListener): void {
    this.#listeners.push(l);
    if (l.step !== undefined && this.#engine !== null) this.#engine.onStep(l.step);
    if (l.submitted !== undefined && this.#engine !== null) this.#engine.onSubmit(l.submitted);
  }

  /** An admission decision (not made for a request that bypasses admission). */
  decided(d: DecisionEvent): void {
    for (const l of this.#listeners) l.decided?.(d);
  }

  /** How long the API took to decide to submit or refuse, ms. */
  admissionDecided(ms: number): void {
    this.metrics?.admissionSeconds.observe(ms / 1000);
  }

  refused(t: RequestTimeline, reason: RefusalReason, traceparent?: string, httpRequestId?: string): void {
    this.metrics?.refused(reason);
    this.tracer?.refused(t, reason, traceparent, httpRequestId);
    if (this.#listeners.length === 0) return;
    const atMs = this.#engine?.now() ?? t.arrivalMs;
    for (const l of this.#listeners) l.refused?.(t, reason, atMs);
  }

  /** Exactly once per admitted request (per choice), from its finish event. */
  finished(t: RequestTimeline, reason: FinishReason, traceparent?: string, httpRequestId?: string): void {
    const m = this.metrics;
    if (m !== null) {
      m.finished(reason);
      if (t.finishedMs !== null) m.e2e.observe((t.finishedMs - t.arrivalMs) / 1000);
    }
    this.tracer?.finished(t, reason, traceparent, httpRequestId);
    for (const l of this.#listeners) l.finished?.(t, reason);
  }

  /** Flush and stop the exporter (buffered spans are sent). */
  async close(): Promise<void> {
    await this.tracer?.shutdown();
  }
}
