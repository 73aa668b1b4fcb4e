// Wires a runner, a scheduler, the engine, its Backend and the HTTP server into one Headroom
// process, with a warm-up step before /ready turns green and a drain that lets in-flight streams
// finish. An engine failure turns /health red and is reported to `onEngineFailure` (serve exits).

import type { FastifyInstance } from 'fastify';
import type { ServerConfig } from './api/config.ts';
import type { Lifecycle } from './api/server.ts';
import { buildServer } from './api/server.ts';
import type { AdmissionController } from './admission/controller.ts';
import type { AdmissionConfig } from './admission/factory.ts';
import { createAdmissionController } from './admission/factory.ts';
import { TraceWriter } from './admission/trace-writer.ts';
import { EngineBackend } from './backend/engine-backend.ts';
import type { Clock } from './engine/clock.ts';
import { monotonicClock } from './engine/clock.ts';
import { Engine } from './engine/engine.ts';
import type { FatalListener } from './engine/engine.ts';
import type { Runner } from './engine/runner/runner.ts';
import { asSeqId } from './engine/plan.ts';
import type { SchedulerConfig } from './engine/scheduler/factory.ts';
import { createScheduler } from './engine/scheduler/factory.ts';
import type { ObservabilityOptions } from './obs/observability.ts';
import { Observability } from './obs/observability.ts';

export interface HeadroomOptions {
  readonly runner: Runner;
  readonly server: ServerConfig;
  readonly scheduler: SchedulerConfig;
  readonly maxQueuedRequests: number;
  readonly statsExtra?: () => Record<string, unknown>;
  /** Metrics (on unless `metrics: false`) and tracing (on with `otelEndpoint`); the SLO comes from `server`. */
  readonly obs?: Omit<ObservabilityOptions, 'sloMs'>;
  /** Time source for the engine and the API (default: the monotonic clock). */
  readonly clock?: Clock;
  /** The step loop broke (a bug): every held request has already failed. */
  readonly onEngineFailure?: FatalListener;
  /** Append one admission-trace row per request choice to this JSONL file. */
  readonly traceOut?: string;
  /** Admission control (default off here; `headroom serve` turns the conformal controller on), or a controller built by the caller. */
  readonly admission?: AdmissionConfig | AdmissionController;
}

export class Headroom {
  readonly engine: Engine;
  readonly backend: EngineBackend;
  readonly app: FastifyInstance;
  readonly lifecycle: Lifecycle = { warm: false };
  readonly obs: Observability;
  readonly trace: TraceWriter | null;
  readonly admission: AdmissionController;
  readonly #opts: HeadroomOptions;

  constructor(opts: HeadroomOptions) {
    this.#opts = opts;
    const scheduler = createScheduler({ maxOutputTokens: opts.server.maxOutputTokens, ...opts.scheduler }, opts.runner.info);
    const clock = opts.clock ?? monotonicClock;
    this.engine = new Engine(opts.runner, scheduler, { maxQueuedRequests: opts.maxQueuedRequests, clock });
    if (opts.onEngineFailure !== undefined) this.engine.onFatal(opts.onEngineFailure);
    this.backend = new EngineBackend(this.engine, clock);
    this.obs = new Observability(this.engine, { sloMs: opts.server.sloMs, ...opts.obs });
    this.trace = opts.traceOut === undefined ? null : new TraceWriter(opts.traceOut);
    const a = opts.admission ?? { mode: 'off' };
    this.admission = 'decide' in a ? a : createAdmissionController(a);
    const admission = this.admission;
    const statsExtra = opts.statsExtra;
    this.app = buildServer({
      backend: this.backend,
      admission,
      ...(this.trace === null ? {} : { trace: this.trace }),
      config: opts.server,
      lifecycle: this.lifecycle,
      obs: this.obs,
      statsExtra: () => ({ admission: admission.state(), ...statsExtra?.() }),
    });
  }

  /** Start the engine, run one warm-up step through the runner, listen. Returns the bound address. */
  async start(): Promise<string> {
    this.engine.start();
    await this.#warmUp();
    const address = await this.app.listen({ host: this.#opts.server.host, port: this.#opts.server.port });
    this.lifecycle.warm = true;
    return address;
  }

  /** Readiness off, refuse new requests, let in-flight ones finish (or time out), then close. */
  async drain(timeoutMs = this.#opts.server.drainTimeoutMs): Promise<'drained' | 'timeout'> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<'timeout'>((r) => (timer = setTimeout(() => r('timeout'), timeoutMs)));
    const outcome = await Promise.race([this.engine.drain().then(() => 'drained' as const), timeout]);
    clearTimeout(timer);
    await this.close();
    return outcome;
  }

  async close(): Promise<void> {
    await this.app.close();
    await this.engine.stop();
    await this.obs.close();
    await this.trace?.close();
    await this.#opts.runner.close();
  }

  /** One real step through the runner (a one-token prompt on a scratch sequence), then clean up. */
  async #warmUp(): Promise<void> {
    const runner = this.#opts.runner;
    const seqId = runner.info.maxSequences - 1;
    const token = runner.tokenizer.tokenize('warm', true)[0]!;
    const sampling = { temperature: 0, topP: 1, seed: 0 };
    const r = await runner.execute({
      kvOps: [],
      items: [{ requestId: 'warm-up', seqId: asSeqId(seqId), tokens: [token], startPos: 0, sample: true, resetSampler: true, sampling }],
    });
    await runner.execute({ kvOps: [{ kind: 'remove', seqId: asSeqId(seqId), p0: 0, p1: -1 }], items: [] });
    if (!r.ok) throw new Error(`warm-up step failed: ${r.message}`);
  }
}
