// Wires a runner, a scheduler, the engine, its Backend and the HTTP server into one Headroom process.
//
// Lifecycle: listen first (a busy port fails in milliseconds, before any model loads; /health
// answers, /ready is 503 and generation 503 `loading`), then load the model, run one warm-up step,
// and turn /ready green. A drain refuses new work and lets in-flight requests finish until the
// drain deadline; past it each remaining request is cut (a stream gets a final SSE error event
// and [DONE]) and the server closes anyway. /health answers until the server closes. An engine
// failure turns /health red and is reported to `onEngineFailure` (serve exits). Listening, ready
// and drain lines go through the server's logger, like the request lines.

import type { FastifyInstance } from 'fastify';
import { ActiveRequests } from './api/active-requests.ts';
import type { ServerConfig } from './api/config.ts';
import { ConnectionGuard } from './api/connections.ts';
import { ProbeListener, listenProbes } from './api/probe-listener.ts';
import type { KeyRing } from './api/auth.ts';
import type { LogDestination } from './api/logger.ts';
import type { Lifecycle } from './api/server.ts';
import { LISTEN_BACKLOG, buildServer } from './api/server.ts';
import { drainUntil } from './api/drain.ts';
import type { DrainOutcome } from './api/drain.ts';
import type { AdmissionController } from './admission/controller.ts';
import type { AdmissionConfig } from './admission/factory.ts';
import { createAdmissionController } from './admission/factory.ts';
import { prepareDecisions } from './admission/rehearse.ts';
import { TraceWriter } from './admission/trace-writer.ts';
import { EngineBackend } from './backend/engine-backend.ts';
import type { Clock } from './engine/clock.ts';
import { monotonicClock } from './engine/clock.ts';
import { Engine } from './engine/engine.ts';
import type { FatalListener } from './engine/engine.ts';
import { asSeqId } from './engine/plan.ts';
import type { Runner, RunnerInfo } from './engine/runner/runner.ts';
import type { SchedulerConfig } from './engine/scheduler/factory.ts';
import { createScheduler } from './engine/scheduler/factory.ts';
import type { FlowControl } from './flow/flow-control.ts';
import type { ObservabilityOptions } from './obs/observability.ts';
import { Observability } from './obs/observability.ts';
import { LiveView } from './obs/live-view.ts';
import type { RecorderOptions } from './obs/recorder/recorder.ts';
import { Recorder } from './obs/recorder/recorder.ts';
import { version } from './api/tokenize.ts';
import { bug } from './util/bug.ts';

export interface HeadroomOptions {
  /** A runner, or how to load one after the server listens. */
  readonly runner: Runner | (() => Promise<Runner>);
  readonly server: ServerConfig;
  readonly scheduler: SchedulerConfig;
  readonly maxQueuedRequests: number;
  /** The engine hands a step's outputs on while the next step computes (EngineOptions.overlapDispatch). */
  readonly overlapDispatch?: boolean;
  readonly statsExtra?: () => Record<string, unknown>;
  /** Metrics (on unless `metrics: false`) and tracing (on with `otelEndpoint`); the SLO comes from `server`. */
  readonly obs?: Omit<ObservabilityOptions, 'sloMs'>;
  /** Process's open-file limit for the connection bounds (default: read from /proc). */
  readonly fdLimit?: number;
  /** Time source for the engine and the API (default: the monotonic clock). */
  readonly clock?: Clock;
  /** The step loop broke (a bug): every held request has already failed. */
  readonly onEngineFailure?: FatalListener;
  /** Append one admission-trace row per request choice to this JSONL file. */
  readonly traceOut?: string;
  /** Admission control (default off here; `headroom serve` turns the conformal controller on), or a controller built by the caller. */
  readonly admission?: AdmissionConfig | AdmissionController;
  /** API keys (`--api-key-file`, HEADROOM_API_KEYS); absent or null = open API, tenant `default`. */
  readonly keys?: KeyRing | null;
  /** Flow control (default: none). */
  readonly flow?: FlowControl;
  /** Where log lines go (default stdout; level and format come from `server`). */
  readonly logDestination?: LogDestination;
  /** The flight recorder (`--record DIR`): its folder and bounds; absent = off. */
  readonly record?: Omit<RecorderOptions, 'clock' | 'version' | 'meta'>;
  /** More folders of recorded runs and results the dashboard can open (`--dashboard-runs`). */
  readonly dashboardRuns?: readonly string[];
}

export type { DrainOutcome } from './api/drain.ts';

export class Headroom {
  readonly app: FastifyInstance;
  readonly lifecycle: Lifecycle = { warm: false };
  readonly active = new ActiveRequests();
  readonly connections: ConnectionGuard;
  /** The --probe-port listener; null without one. */
  readonly probes: ProbeListener | null;
  readonly trace: TraceWriter | null;
  readonly admission: AdmissionController;
  readonly #opts: HeadroomOptions;
  readonly #clock: Clock;
  #engine: Engine | null = null;
  #backend: EngineBackend | null = null;
  #obs: Observability | null = null;
  #address = '';
  #stopKeepWarm: (() => void) | null = null;
  #recorder: Recorder | null = null;
  #live: LiveView | null = null;

  constructor(opts: HeadroomOptions) {
    this.#opts = opts;
    this.#clock = opts.clock ?? monotonicClock;
    this.connections = new ConnectionGuard({ maxConnections: opts.server.maxConnections, maxConnectionsPerAddress: opts.server.maxConnectionsPerAddress, ...(opts.fdLimit === undefined ? {} : { fdLimit: opts.fdLimit }) });
    this.probes = opts.server.probePort === null ? null : new ProbeListener(opts.server.probePort, opts.server);
    this.trace = opts.traceOut === undefined ? null : new TraceWriter(opts.traceOut);
    const a = opts.admission ?? { mode: 'off' };
    this.admission = 'decide' in a ? a : createAdmissionController(a);
    const admission = this.admission;
    const statsExtra = opts.statsExtra;
    if (typeof opts.runner !== 'function') this.#install(opts.runner);
    this.app = buildServer({
      // The API sees the backend only once warm: the warm-up step must not overlap a real one.
      backend: () => (this.lifecycle.warm ? this.#backend : null),
      config: opts.server,
      lifecycle: this.lifecycle,
      active: this.active,
      connections: this.connections,
      ...(this.probes === null ? {} : { probes: this.probes }),
      obs: () => this.#obs,
      metrics: opts.obs?.metrics !== false,
      admission,
      ...(this.trace === null ? {} : { trace: this.trace }),
      ...(opts.keys == null ? {} : { keys: opts.keys }),
      ...(opts.flow === undefined ? {} : { flow: opts.flow }),
      ...(opts.logDestination === undefined ? {} : { logDestination: opts.logDestination }),
      statsExtra: () => ({ admission: admission.state(), ...(opts.flow === undefined ? {} : { flow: opts.flow.state() }), ...(this.#recorder === null ? {} : { recorder: this.recorderStats() }), ...statsExtra?.() }),
      dashboard: {
        live: () => this.#live,
        runDirs: [...(opts.record === undefined ? [] : [opts.record.dir]), ...(opts.dashboardRuns ?? [])],
        bench: () => import('./harness/store.ts'),
      },
    });
  }

  /** The engine; a bug to ask before the model is loaded. */
  get engine(): Engine {
    if (this.#engine === null) bug('the engine is asked for before the model is loaded');
    return this.#engine;
  }


  get obs(): Observability {
    if (this.#obs === null) bug('observability is asked for before the model is loaded');
    return this.#obs;
  }

  /** The flight recorder, once the model is loaded (null without --record). */
  get recorder(): Recorder | null {
    return this.#recorder;
  }

  recorderStats(): Record<string, unknown> | null {
    const r = this.#recorder;
    return r === null ? null : { run: r.runName, recording: r.recording, numWritten: r.numWritten, numDropped: r.numDropped, writeError: r.writeError };
  }

  get loaded(): boolean {
    return this.#engine !== null;
  }

  /** Listen, then load and warm up. Returns the bound address. */
  async start(): Promise<string> {
    const address = await this.listen();
    await this.load();
    return address;
  }

  /** Bind the port (fails at once if it is taken); the model is not needed for this. */
  async listen(): Promise<string> {
    const address = await this.app.listen({ host: this.#opts.server.host, port: this.#opts.server.port, backlog: LISTEN_BACKLOG, listenTextResolver: (a) => `listening at ${a}; loading the model` });
    this.#address = address;
    await listenProbes(this.app, this.probes, this.#opts.server.host);
    return address;
  }

  /** Load the model (if given as a loader), start the engine, warm up, turn /ready green. */
  async load(): Promise<void> {
    // After listen(): a server that could not bind its port never touches a state directory another one uses.
    this.admission.open?.();
    if (this.#engine === null) {
      const load = this.#opts.runner as () => Promise<Runner>;
      this.#install(await load());
    }
    this.engine.start();
    const decodeMs = await this.#warmUp();
    const engine = this.engine;
    // After the warm-up: its probes' steps and one-token outputs are not what the saved estimates describe.
    this.admission.keep?.('engine', { save: () => engine.estimates(), restore: (data) => engine.restoreEstimates(data) });
    this.#stopKeepWarm = prepareDecisions(this.admission, this.#opts.admission, { sloMs: this.#opts.server.sloMs, now: () => engine.now(), snapshot: (fresh) => engine.snapshot(fresh) });
    if (this.#opts.record !== undefined && this.#recorder === null) await this.#startRecorder(this.#opts.record);
    this.lifecycle.warm = true;
    const info = this.engine.runner.info;
    const names = this.#opts.server.servedModelNames;
    const as = names.length > 0 ? ` as ${names.join(', ')}` : '';
    const model = modelLine(info);
    if (model !== null) this.app.log.info(model);
    const warnings = info.details['loadWarnings'];
    if (Array.isArray(warnings)) for (const w of warnings) this.app.log.warn(`llama.cpp: ${String(w)}`);
    const capLate = capOutputWarning(this.#opts.server.maxOutputTokens, decodeMs, this.#opts.server.sloMs);
    if (capLate !== null) this.app.log.warn(capLate);
    this.app.log.info(`serving ${info.modelId}${as} with the ${info.name} runner and the ${this.#opts.scheduler.scheduler} scheduler on ${this.#address}; ready`);
  }

  /**
   * Readiness off, refuse new requests, let in-flight ones finish until `deadlineMs`; past it, cut
   * the rest (streams end with an SSE error event and [DONE]). Then close.
   */
  async drain(deadlineMs = this.#opts.server.drainTimeoutMs): Promise<DrainOutcome> {
    const engine = this.#engine;
    if (engine === null) {
      await this.close();
      return 'drained';
    }
    const outcome = await drainUntil(deadlineMs, { log: this.app.log, active: this.active, stop: () => engine.drain(), whenIdle: () => engine.whenIdle() });
    await this.close();
    return outcome;
  }

  async close(): Promise<void> {
    this.#stopKeepWarm?.();
    this.#live?.stop();
    await this.probes?.close();
    const closing = this.app.close();
    // Whatever is still connected now (idle keep-alive, a slow client mid-request) has nothing more coming.
    this.app.server.closeAllConnections();
    await closing;
    if (this.#engine !== null) {
      await this.#engine.stop();
      await this.#obs?.close();
      await this.#engine.runner.close();
    }
    await this.trace?.close();
    await this.#recorder?.close();
    await this.#opts.flow?.close?.();
  }

  async #startRecorder(record: NonNullable<HeadroomOptions['record']>): Promise<void> {
    const opts = this.#opts;
    const info = this.engine.runner.info;
    const meta = {
      model: info.modelId,
      runner: info.name,
      maxSequences: info.maxSequences,
      contextTokens: info.contextTokens,
      maxBatchTokens: info.maxBatchTokens,
      maxOutputTokens: opts.server.maxOutputTokens,
      scheduler: opts.scheduler,
      maxQueuedRequests: opts.maxQueuedRequests,
      sloMs: opts.server.sloMs,
      admission: this.admission.name,
      config: opts.statsExtra?.()['config'] ?? null,
    };
    try {
      // A write error later (a full disk) stops the recording, never the server: one line, one count.
      const onWriteError = (err: Error): void => {
        this.#obs?.metrics?.recorderWriteFailed();
        this.app.log.error(`flight recorder: cannot write to ${record.dir} (${err.message}); recording stopped, serving goes on`);
      };
      this.#recorder = await Recorder.start({ ...record, clock: this.#clock, version: version().version, meta, blockSize: opts.scheduler.blockSize ?? 16, onWriteError });
    } catch (err) {
      throw new Error(`--record: cannot start a recording in ${record.dir}: ${(err as Error).message}`, { cause: err });
    }
    this.obs.addListener(this.#recorder);
    this.app.log.info(`recording to ${this.#recorder.runDir}`);
  }

  #install(runner: Runner): void {
    const opts = this.#opts;
    const scheduler = createScheduler({ maxOutputTokens: opts.server.maxOutputTokens, ...opts.scheduler }, runner.info);
    this.#engine = new Engine(runner, scheduler, { maxQueuedRequests: opts.maxQueuedRequests, clock: this.#clock, overlapDispatch: opts.overlapDispatch ?? false });
    if (opts.onEngineFailure !== undefined) this.#engine.onFatal(opts.onEngineFailure);
    const threads = runner.info.details['threads'];
    this.#engine.onSlowSteps((slow, slowdown) => {
      if (slow) {
        this.app.log.warn(
          `steps run ${slowdown.toFixed(1)}x slower than steps of the same kind did earlier: something else is using the CPU. ` +
            `llama.cpp's ${typeof threads === 'number' ? `${threads} ` : ''}threads spin-wait for each other and lose whole timeslices to other work; on a shared host --threads 1 can be much faster (/stats engine.stepTime)`,
        );
      } else {
        this.app.log.info(`steps are back to ${slowdown.toFixed(1)}x their earlier time`);
      }
    });
    this.#backend = new EngineBackend(this.#engine, this.#clock);
    const modelName = opts.server.servedModelNames[0];
    this.#obs = new Observability(this.#engine, {
      sloMs: opts.server.sloMs,
      ...(modelName === undefined ? {} : { modelName }),
      ...(opts.keys == null ? {} : { tenants: opts.keys.tenants() }),
      ...(opts.flow === undefined ? {} : { flow: opts.flow }),
      ...opts.obs,
    });
    this.#live = new LiveView(this.#engine, { sloMs: opts.server.sloMs });
    this.#obs.addListener(this.#live);
  }

  /**
   * Real steps through the runner on a scratch sequence before serving: a prefill, twice, and a few
   * decode steps, timed, then cleaned up. They warm the backend and seed the engine's running
   * averages, which admission control reads (a cold engine's zero rates are a state no latency
   * model has seen). The prefill is 64 tokens and the faster of two runs counts: a 12-token prefill
   * measured mostly a step's fixed cost, and a first step in a fresh process its one-time costs — a
   * prefill rate 10x too low, under which admission's floor (a request's own prefill at that rate)
   * refused every demo request as impossible, and nothing admitted ever corrected it. The runner
   * works on the scratch sequence directly, so the prefix cache gets nothing.
   */
  async #warmUp(): Promise<number> {
    const engine = this.engine;
    const runner = engine.runner;
    const seqId = asSeqId(runner.info.maxSequences - 1);
    const prompt = runner.tokenizer.tokenize('the river and the stone, the queue and the server, '.repeat(16), true).slice(0, Math.min(64, runner.info.contextTokens - 8));
    const sampling = { temperature: 0, topP: 1, seed: 0 };
    const item = (tokens: number[], startPos: number, first: boolean) => ({ requestId: 'warm-up', seqId, tokens, startPos, sample: true, resetSampler: first, sampling });
    const remove = { kind: 'remove' as const, seqId, p0: 0, p1: -1 };
    let prefillMs = Infinity;
    let r: Awaited<ReturnType<typeof runner.execute>> | null = null;
    for (let i = 0; i < 2; i++) {
      const t0 = performance.now();
      r = await runner.execute({ kvOps: i === 0 ? [] : [remove], items: [item(prompt, 0, true)] });
      if (!r.ok) throw new Error(`warm-up step failed: ${r.message}`);
      prefillMs = Math.min(prefillMs, performance.now() - t0);
    }
    if (r === null || !r.ok) throw new Error('warm-up step failed');
    const numDecode = 4;
    const t0 = performance.now();
    for (let i = 0; i < numDecode && r.ok; i++) r = await runner.execute({ kvOps: [], items: [item([r.sampled[0]!], prompt.length + i, false)] });
    const decodeMs = (performance.now() - t0) / numDecode;
    await runner.execute({ kvOps: [remove], items: [] });
    if (!r.ok) throw new Error(`warm-up step failed: ${r.message}`);
    const stepMsByBatch = [[1, decodeMs] as const, ...(await this.#timeDecodeBatches(prompt.slice(0, 8)))];
    engine.seedAverages({ stepMs: decodeMs, prefillTokensPerS: (prompt.length * 1000) / Math.max(prefillMs, 1e-3), decodeTokensPerS: 1000 / Math.max(decodeMs, 1e-3), stepMsByBatch });
    return decodeMs;
  }

  /**
   * Decode step time at batch sizes 2, 4, 8, ... and the scheduler's sequence slots, on as many
   * scratch sequences (the top ids; one prefill step for all of them, then per size one untimed
   * and two timed decode steps), cleaned up after. The engine's step-time table
   * (EngineSnapshot.stepMsByBatch) grows a size no real step has measured from the nearest
   * measured size by these (StepTimesByBatch.seed) rather than linearly in the batch, which
   * overstates a large batch many times on a CPU: admission plans a request by the batch it will
   * decode in, and a size planned too slow is refused, so never run, so never measured. For the
   * tiny model with 16 slots that is 13 steps of 5–20 ms.
   */
  async #timeDecodeBatches(prompt: readonly number[]): Promise<(readonly [number, number])[]> {
    const runner = this.engine.runner;
    const maxSeq = runner.info.maxSequences;
    // The sizes the scheduler will run (none past one for FIFO), up to its sequence slots.
    const slots = Math.min(maxSeq, this.engine.scheduler.snapshot().maxSequences);
    const sizes: number[] = [];
    for (let b = 2; b < slots; b *= 2) sizes.push(b);
    if (slots >= 2) sizes.push(slots);
    const top = sizes.at(-1);
    if (top === undefined || prompt.length === 0) return [];
    const sampling = { temperature: 0, topP: 1, seed: 0 };
    const seqs = Array.from({ length: top }, (_, i) => asSeqId(maxSeq - 1 - i));
    const positions = seqs.map(() => prompt.length);
    const item = (i: number, tokens: readonly number[], startPos: number, first: boolean) => ({ requestId: `warm-up-${i}`, seqId: seqs[i]!, tokens, startPos, sample: true, resetSampler: first, sampling });
    const out: (readonly [number, number])[] = [];
    try {
      let r = await runner.execute({ kvOps: [], items: seqs.map((_, i) => item(i, prompt, 0, true)) });
      if (!r.ok) throw new Error(`warm-up prefill of ${top} sequences failed: ${r.message}`);
      const last = r.sampled.slice();
      for (const b of sizes) {
        let timedMs = 0;
        for (let k = 0; k < 3; k++) {
          const t0 = performance.now();
          r = await runner.execute({ kvOps: [], items: seqs.slice(0, b).map((_, i) => item(i, [last[i] ?? prompt[0]!], positions[i]!, false)) });
          if (k > 0) timedMs += performance.now() - t0;
          if (!r.ok) throw new Error(`warm-up decode step at batch ${b} failed: ${r.message}`);
          for (let i = 0; i < b; i++) {
            last[i] = r.sampled[i] ?? null;
            positions[i]!++;
          }
        }
        out.push([b, timedMs / 2]);
      }
    } finally {
      await runner.execute({ kvOps: seqs.map((seqId) => ({ kind: 'remove' as const, seqId, p0: 0, p1: -1 })), items: [] });
    }
    return out;
  }
}

/**
 * The warning for an SLO shorter than the longest output the server allows takes alone: an output
 * of `maxOutputTokens` decodes in at least that many steps, each no faster than the warm-up's
 * batch-1 step, so a request that runs to the cap finishes past the SLO whatever admission does
 * (it cannot see at admission which outputs will end late at EOS). null when the cap fits.
 */
export function capOutputWarning(maxOutputTokens: number, decodeStepMs: number, sloMs: number): string | null {
  const aloneMs = maxOutputTokens * decodeStepMs;
  if (!(aloneMs > sloMs)) return null;
  const s = (ms: number): string => `${(ms / 1000).toFixed(1)} s`;
  return (
    `an output of --max-output-tokens (${maxOutputTokens} tokens) takes about ${s(aloneMs)} alone at the warm-up's decode step ` +
    `(${decodeStepMs.toFixed(1)} ms), past the ${s(sloMs)} SLO (--slo-ms): outputs that long finish late whatever admission does — ` +
    `raise --slo-ms or lower --max-output-tokens (docs/admission.md, "What the SLO must allow")`
  );
}

/**
 * One line on what a real model is served with (the llama runner's details, as /stats shows them):
 * the chat template's source, the context served against the trained one, the tokenizer's path.
 */
export function modelLine(info: RunnerInfo): string | null {
  const d = info.details;
  if (info.name !== 'llama' || typeof d['chatTemplate'] !== 'string') return null;
  const trained = Number(d['trainedContextTokens']);
  const ctx = info.contextTokens < trained ? `${info.contextTokens} of the ${trained} it was trained on (--ctx serves more)` : `${info.contextTokens} (trained: ${trained})`;
  const thinking = d['thinkingByDefault'] === true ? '; thinking on by default' : '';
  const special = d['parseSpecialInMessages'] === true ? 'parsed as control tokens (--special-in-messages)' : 'kept as text';
  return `model ${info.modelId}: chat template ${String(d['chatTemplate'])}${thinking}; context ${ctx}; tokenizer ${String(d['tokenizerPath'])}, ${String(d['specialSplit'])} special-token split; control-token text in messages ${special}`;
}
