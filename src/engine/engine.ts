// The engine's step loop: decide → execute → apply, one step at a time, forever.
//
//   plan = scheduler.schedule(now); result = await runner.execute(plan.runner); outputs = scheduler.update(plan, result, now)
//
// Each output goes to its request's sink (the API's output stream) after the step; each step
// leaves a StepRecord (the last few kept for a crash dump, all handed to observers). The loop
// sleeps when there is nothing to do and wakes on an arrival, an abort or a timer the scheduler
// asked for; it never busy-spins. It owns the capacity bound and the drain gate but no policy.
//
// Failure: a runner that throws fails that step's requests and the loop goes on (the scheduler's
// state is intact). A throw anywhere else in a step — schedule, update, a sink, an observer —
// means the bookkeeping can no longer be trusted: every held request ends with an error, the
// engine refuses new work, the last step records go to the log, and fatal listeners run (the
// server turns /health red and, by default, exits so a supervisor restarts it).

import type { Clock } from './clock.ts';
import { monotonicClock } from './clock.ts';
import type { RequestOutput } from './outputs.ts';
import type { StepResult } from './plan.ts';
import type { EndRequest, Request } from './request.ts';
import type { Runner } from './runner/runner.ts';
import type { Scheduler, SchedulerPlan, SchedulerSnapshot } from './scheduler/scheduler.ts';
import type { EngineSnapshot } from './snapshot.ts';
import { Ewma, OutputLengths, RecentBatch, StepTimesByBatch, type SavedOutputLengths, type SavedStepTimes } from './snapshot.ts';
import { buildSnapshot } from './snapshot-builder.ts';
import type { StepKind, StepRecord } from './step-record.ts';
import { StepLog } from './step-record.ts';
import { bug } from '../util/bug.ts';

/** Engine.estimates(): what a restart restores. */
export interface SavedEstimates {
  readonly outputLengths: SavedOutputLengths;
  readonly stepTimesByBatch: SavedStepTimes;
}

export interface EngineOptions {
  /** Most requests held in memory (waiting + running); far above what the scheduler runs at once. */
  readonly maxQueuedRequests: number;
  /** Time source (tests and replay inject one). */
  readonly clock?: Clock;
  /** Step records kept for a crash dump (default 32). */
  readonly stepLogSize?: number;
  /**
   * Hand a step's outputs to their sinks (and its record to the observers) while the next step
   * computes, instead of before it starts (default false). The runner computes off the main
   * thread, so the sinks' work (SSE framing and writes, metrics) then overlaps the model instead
   * of sitting between two of its calls; each output still reaches its sink in order, one step
   * later in wall time by the time it takes to plan and launch that step.
   */
  readonly overlapDispatch?: boolean;
}

export type SubmitRefusal = 'capacity' | 'draining' | 'engine_failed';
export type SubmitResult = { readonly ok: true } | { readonly ok: false; readonly reason: SubmitRefusal };

/** Receives a request's outputs in order; the last one carries its finish reason. */
export type OutputSink = (out: RequestOutput) => void;

export interface EngineStats {
  readonly numSteps: number;
  readonly numSubmitted: number;
  /** Steps whose runner call threw (bugs; each failed its requests with an error). */
  readonly numRunnerErrors: number;
  readonly refusals: Readonly<Record<SubmitRefusal, number>>;
  readonly draining: boolean;
  /** Why the step loop stopped for good, or null while it is healthy. */
  readonly failure: string | null;
  readonly scheduler: SchedulerSnapshot;
  /** The step-time budget (null when the scheduler has none). */
  readonly stepTime: StepTimeStats | null;
  /** How long outputs run before they end on their own, 90th percentile, tokens (EngineSnapshot.outputTokensP90). */
  readonly outputTokensP90: number | null;
  /** Step time by decode batch size, ms, index b − 1 (EngineSnapshot.stepMsByBatch), rounded to 0.01; empty before a decode step. */
  readonly stepMsByBatch: readonly number[];
  /** The decode batch over the last seconds (EngineSnapshot.recentDecodeBatch). */
  readonly recentDecodeBatch: number;
}

export interface StepTimeStats {
  /** Whether the cost model has seen enough steps (prompt steps among them) to size chunks. */
  readonly warm: boolean;
  /** The target a step with decoding requests is held to, ms (null until warm). */
  readonly targetMs: number | null;
  /** Steps now against steps of the same kind when first seen (median ratio; null before 16). */
  readonly slowdown: number | null;
  /** In the slow state (entered at SLOW_STEP_ENTER, left below SLOW_STEP_LEAVE; logged as a warning). */
  readonly slow: boolean;
  /** The cost model's terms: [ms, ms/decode row, ms/prompt row, ms/1000 own cells, ms/(row·1000 pool cells)]. */
  readonly theta: readonly number[];
  /**
   * What a prompt chunk adds to a step, as chunks are sized: [ms a mixed step, ms a row, ms a row per
   * 1000 cells of position], for steps under 64 rows and for 64 and over (null until seen).
   */
  readonly chunkCost: { readonly small: readonly number[] | null; readonly tiled: readonly number[] | null };
}

/** Steps this much slower than the same kind of step when first seen put the engine in the slow state ... */
export const SLOW_STEP_ENTER = 3;
/** ... and below this it leaves it. */
export const SLOW_STEP_LEAVE = 1.5;
/** Called when steps become far slower than they were (slow = true) and when they recover. */
export type SlowStepListener = (slow: boolean, slowdown: number) => void;

/** Called after every step that ran the runner. */
export type StepObserver = (record: StepRecord) => void;
/** Called for every request the engine accepts, at submit (the flight recorder reads its plain facts). */
export type SubmitObserver = (req: Request) => void;
export type FatalListener = (error: Error, recentSteps: readonly StepRecord[]) => void;

interface Held {
  readonly req: Request;
  readonly sink: OutputSink;
}

const EWMA_ALPHA = 0.2;
/** The long step-time average's weight per step: about a long request's decode. */
const LONG_EWMA_ALPHA = 1 / 256;
/** An idle engine's snapshot is rebuilt when older than this, ms. */
const SNAPSHOT_MAX_AGE_MS = 50;

export class Engine {
  readonly runner: Runner;
  readonly scheduler: Scheduler;
  readonly #opts: EngineOptions;
  readonly #clock: Clock;
  readonly #held = new Map<string, Held>();
  readonly #log: StepLog;
  #wake: (() => void) | null = null;
  #timer: NodeJS.Timeout | null = null;
  #running = false;
  #loopDone: Promise<void> = Promise.resolve();
  #draining = false;
  #failure: Error | null = null;
  #idleWaiters: (() => void)[] = [];
  #numSteps = 0;
  #numSubmitted = 0;
  #numRunnerErrors = 0;
  #refusals = { capacity: 0, draining: 0, engine_failed: 0 };
  #observers: StepObserver[] = [];
  #submitObservers: SubmitObserver[] = [];
  #slowListeners: SlowStepListener[] = [];
  #slow = false;
  #fatalListeners: FatalListener[] = [];
  #arrivals: string[] = [];
  #aborts: { requestId: string; reason: EndRequest }[] = [];
  #snapshot: EngineSnapshot | null = null;
  /** With overlapDispatch: the last step's outputs and record, handed on while the next one computes. */
  #pending: { readonly outputs: readonly RequestOutput[]; readonly record: StepRecord } | null = null;
  readonly #avgStepMs = new Ewma(EWMA_ALPHA);
  readonly #longStepMs = new Ewma(LONG_EWMA_ALPHA);
  /** How long finished requests' outputs ran, and whether they ended on their own (the snapshot's outputTokensP90). */
  readonly #outputLengths = new OutputLengths();
  /** Step time by decode batch size (the snapshot's stepMsByBatch). */
  readonly #stepTimesByBatch: StepTimesByBatch;
  /** The decode batch over wall time (the snapshot's recentDecodeBatch). */
  readonly #recentBatch = new RecentBatch();
  readonly #prefillRate = new Ewma(EWMA_ALPHA);
  readonly #decodeRate = new Ewma(EWMA_ALPHA);

  constructor(runner: Runner, scheduler: Scheduler, opts: EngineOptions) {
    if (!(opts.maxQueuedRequests >= 1)) throw new Error(`Engine: expected maxQueuedRequests ≥ 1, got ${opts.maxQueuedRequests}`);
    this.runner = runner;
    this.scheduler = scheduler;
    this.#stepTimesByBatch = new StepTimesByBatch(Math.max(1, scheduler.snapshot().maxSequences));
    this.#opts = opts;
    this.#clock = opts.clock ?? monotonicClock;
    this.#log = new StepLog(opts.stepLogSize ?? 32);
  }

  now(): number {
    return this.#clock.nowMs();
  }

  get draining(): boolean {
    return this.#draining;
  }

  /** The error that stopped the loop for good, or null. */
  get failure(): Error | null {
    return this.#failure;
  }

  /** Requests held (waiting or running). */
  get numUnfinished(): number {
    return this.#held.size;
  }

  onStep(fn: StepObserver): void {
    this.#observers.push(fn);
  }

  onSubmit(fn: SubmitObserver): void {
    this.#submitObservers.push(fn);
  }

  /**
   * Told when steps run SLOW_STEP_ENTER times slower than steps of the same kind did when first
   * seen (llama.cpp's spinning threads losing their cores to other work: on a loaded 2-core host
   * two threads ran 10–30x slower than one), and when they are back under SLOW_STEP_LEAVE.
   */
  onSlowSteps(fn: SlowStepListener): void {
    this.#slowListeners.push(fn);
  }

  onFatal(fn: FatalListener): void {
    this.#fatalListeners.push(fn);
  }

  start(): void {
    if (this.#running || this.#failure !== null) return;
    this.#running = true;
    this.#loopDone = this.#loop();
  }

  /** Stop the loop after the current step (requests still held are left as they are). */
  async stop(): Promise<void> {
    this.#running = false;
    this.#signal();
    await this.#loopDone;
  }

  /** Hold a request; its outputs go to `sink` after each step until the one that finishes it. */
  submit(req: Request, sink: OutputSink): SubmitResult {
    const refusal: SubmitRefusal | null =
      this.#failure !== null ? 'engine_failed' : this.#draining ? 'draining' : this.#held.size >= this.#opts.maxQueuedRequests ? 'capacity' : null;
    if (refusal !== null) {
      this.#refusals[refusal]++;
      return { ok: false, reason: refusal };
    }
    if (this.#held.has(req.id)) bug(`request id ${req.id} submitted twice`);
    this.#numSubmitted++;
    this.#held.set(req.id, { req, sink });
    this.#arrivals.push(req.id);
    this.scheduler.add(req);
    for (const fn of this.#submitObservers) fn(req);
    this.#snapshot = null;
    this.#signal();
    return { ok: true };
  }

  /** The front end ended a request (client gone: `abort`; stop string matched: `stop`); it finishes before the next step. */
  abort(requestId: string, reason: EndRequest = 'abort'): void {
    const h = this.#held.get(requestId);
    if (h === undefined || h.req.abortRequested) return;
    this.#aborts.push({ requestId, reason });
    this.scheduler.abort(h.req, reason);
    this.#signal();
  }

  /** Refuse new work from now on; resolves when every held request has finished. */
  drain(): Promise<void> {
    this.#draining = true;
    return this.whenIdle();
  }

  /** Resolves once nothing is waiting or running and the loop has gone to sleep (the KV clean-up step done). */
  whenIdle(): Promise<void> {
    if (this.#held.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idleWaiters.push(resolve));
  }

  /**
   * The state admission reads: frozen, as of the last step or arrival, or SNAPSHOT_MAX_AGE_MS ago
   * at most (an idle engine's recentDecodeBatch falls with time, with no step to mark it). `fresh`
   * builds it anew even when the last one is current (the decision rehearsal before /ready:
   * admission/rehearse.ts).
   */
  snapshot(fresh = false): EngineSnapshot {
    if (fresh || (this.#snapshot !== null && this.now() - this.#snapshot.atMs > SNAPSHOT_MAX_AGE_MS)) this.#snapshot = null;
    this.#snapshot ??= buildSnapshot({
      numSteps: this.#numSteps,
      atMs: this.now(),
      held: this.#held.values(),
      scheduler: this.scheduler.snapshot(),
      avgStepMs: this.#avgStepMs.value,
      longStepMs: this.#longStepMs.value,
      prefillTokensPerS: this.#prefillRate.value,
      decodeTokensPerS: this.#decodeRate.value,
      outputTokensP90: this.#outputLengths.value,
      stepMsByBatch: this.#stepTimesByBatch.table(),
      recentDecodeBatch: this.#recentBatch.valueAt(this.now()),
      remainingTokens: (generated) => this.#outputLengths.remaining(generated),
    });
    return this.#snapshot;
  }

  /**
   * Start the running averages from a measurement taken before serving (the warm-up), so the
   * snapshot never shows the never-seen zero rates that a latency model has no data for; and how
   * the step time grows with the batch, for the sizes no step has measured (StepTimesByBatch.seed).
   */
  seedAverages(m: { readonly stepMs: number; readonly prefillTokensPerS: number; readonly decodeTokensPerS: number; readonly stepMsByBatch?: ReadonlyArray<readonly [batch: number, ms: number]> }): void {
    if (m.stepMsByBatch !== undefined) this.#stepTimesByBatch.seed(m.stepMsByBatch);
    if (this.#avgStepMs.value === null) this.#avgStepMs.add(m.stepMs);
    if (this.#longStepMs.value === null) this.#longStepMs.add(m.stepMs);
    if (this.#prefillRate.value === null) this.#prefillRate.add(m.prefillTokensPerS);
    if (this.#decodeRate.value === null) this.#decodeRate.add(m.decodeTokensPerS);
    this.#snapshot = null;
  }


  /**
   * What the engine has learned that admission's arithmetic reads and a restart would lose: the
   * finished outputs' lengths and the step time by batch size (kept with --admission-state).
   */
  estimates(): SavedEstimates {
    return { outputLengths: this.#outputLengths.save(), stepTimesByBatch: this.#stepTimesByBatch.save() };
  }

  /** Restores estimates() from an earlier process on the same model and slots; throws, restoring neither, when they do not fit. Returns a phrase for a log line. */
  restoreEstimates(data: unknown): string {
    const d = data as Partial<SavedEstimates> | null;
    // Check both before changing either: a copy of the step table takes the restore first.
    const probe = new StepTimesByBatch(Math.max(1, this.scheduler.snapshot().maxSequences));
    const sizes = probe.restore(d?.stepTimesByBatch);
    new OutputLengths().restore(d?.outputLengths);
    this.#stepTimesByBatch.restore(d?.stepTimesByBatch);
    const lengths = this.#outputLengths.restore(d?.outputLengths);
    return `${lengths} output lengths, step times at ${sizes} batch sizes`;
  }

  stats(): EngineStats {
    return {
      numSteps: this.#numSteps,
      numSubmitted: this.#numSubmitted,
      numRunnerErrors: this.#numRunnerErrors,
      refusals: { ...this.#refusals },
      draining: this.#draining,
      failure: this.#failure === null ? null : this.#failure.message,
      scheduler: this.scheduler.snapshot(),
      stepTime: this.stepTimeStats(),
      outputTokensP90: this.#outputLengths.value,
      stepMsByBatch: Array.from(this.#stepTimesByBatch.table() ?? [], (ms) => Math.round(ms * 100) / 100),
      recentDecodeBatch: Math.round(this.#recentBatch.valueAt(this.now()) * 100) / 100,
    };
  }

  #checkSlow(): void {
    const slowdown = this.scheduler.stepBudget?.model.slowdown ?? null;
    if (slowdown === null) return;
    const slow = this.#slow ? slowdown >= SLOW_STEP_LEAVE : slowdown >= SLOW_STEP_ENTER;
    if (slow === this.#slow) return;
    this.#slow = slow;
    for (const fn of this.#slowListeners) fn(slow, slowdown);
  }

  stepTimeStats(): StepTimeStats | null {
    const b = this.scheduler.stepBudget;
    if (b == null) return null;
    const round = (x: number): number => Math.round(x * 1e4) / 1e4;
    const target = b.targetMs();
    const slowdown = b.model.slowdown;
    const lines = b.chunks.lines();
    const chunkCost = { small: lines.small?.map(round) ?? null, tiled: lines.tiled?.map(round) ?? null };
    return { warm: b.warm, targetMs: target === null ? null : round(target), slowdown: slowdown === null ? null : round(slowdown), slow: this.#slow, theta: b.model.theta.map(round), chunkCost };
  }

  async #loop(): Promise<void> {
    while (this.#running) {
      try {
        await this.#step();
        // A step the runner ran on this thread never let the event loop in: sockets and timers
        // get their turn between any two steps.
        await new Promise<void>((resolve) => setImmediate(resolve));
      } catch (e) {
        this.#fail(e instanceof Error ? e : new Error(String(e)));
        return;
      }
    }
    try {
      this.#flush();
    } catch (e) {
      this.#fail(e instanceof Error ? e : new Error(String(e)));
    }
  }

  /** The held-back step's outputs to their sinks, its record to the observers (overlapDispatch). */
  #flush(): void {
    const p = this.#pending;
    if (p === null) return;
    this.#pending = null;
    this.#dispatch(p.outputs);
    this.#publish(p.record);
  }

  #publish(record: StepRecord): void {
    for (const fn of this.#observers) fn(record);
    if (this.#numSteps % 32 === 0) this.#checkSlow();
  }

  async #step(): Promise<void> {
    const t0 = this.now();
    // What this plan is the first to see: arrivals and aborts from before schedule(). Those that
    // come while the runner computes go to the next record, so a replay feeds each record's
    // arrivals and aborts in just before its schedule() (an empty plan records nothing: its
    // arrivals wait for the next step that runs).
    const numArrivals = this.#arrivals.length;
    const numAborts = this.#aborts.length;
    const plan = this.scheduler.schedule(t0);
    // Outputs the plan made (a request refused or expired) come after the held-back step's.
    if (plan.outputs.length > 0) this.#flush();
    this.#dispatch(plan.outputs);
    if (plan.runner.items.length === 0 && plan.runner.kvOps.length === 0) {
      this.#flush();
      this.#notifyIdle();
      this.runner.idle?.();
      await this.#sleep(plan.wakeAtMs === null ? null : Math.max(0, plan.wakeAtMs - t0));
      return;
    }
    const computing = this.runner.execute(plan.runner).catch((e: unknown): StepResult => {
      this.#numRunnerErrors++;
      console.error('headroom: the model runner threw (a bug):', e);
      return { ok: false, reason: 'backend_error', message: e instanceof Error ? e.message : String(e) };
    });
    // The runner computes on its own thread from here: the last step's outputs go out meanwhile.
    this.#flush();
    const result = await computing;
    if (!result.ok && result.reason === 'kv_ops_failed') {
      // Part of the plan's KV operations ran: the scheduler's books (blocks, prefix cache, sequence
      // ids) no longer describe the model's cells, and no update() can say which cells are whose.
      // Stop loudly (as vLLM does on a worker failure) rather than serve from a cache that lies.
      const n = plan.runner.kvOps.length;
      const op = plan.runner.kvOps[result.appliedKvOps];
      throw new Error(`the model runner applied ${result.appliedKvOps} of ${n} KV operations of step ${this.#numSteps} and then failed${op === undefined ? '' : ` on ${JSON.stringify(op)}`}: ${result.message}; the scheduler's KV accounting no longer matches the model's cells`);
    }
    const outputs = this.scheduler.update(plan, result, this.now());
    const record = this.#record(plan, result, t0, outputs, numArrivals, numAborts);
    this.#log.push(record);
    this.#numSteps++;
    this.#snapshot = null;
    if (this.#opts.overlapDispatch === true) {
      this.#pending = { outputs, record };
      return;
    }
    this.#dispatch(outputs);
    this.#publish(record);
  }

  #record(plan: SchedulerPlan, result: StepResult, startMs: number, outputs: readonly RequestOutput[], numArrivals: number, numAborts: number): StepRecord {
    const endMs = this.now();
    let numPromptTokens = 0;
    let numDecodeTokens = 0;
    plan.scheduled.forEach(({ request, numNewTokens }, i) => {
      const item = plan.runner.items[i];
      const isDecode = item !== undefined && item.tokens.length === 1 && item.startPos >= request.numPromptTokens;
      if (isDecode) numDecodeTokens++;
      else numPromptTokens += numNewTokens;
    });
    const kind: StepKind = numPromptTokens === 0 ? 'decode' : numDecodeTokens === 0 ? 'prefill' : 'mixed';
    const computeMs = result.ok ? result.computeMs : null;
    const stepS = (endMs - startMs) / 1000;
    this.#avgStepMs.add(endMs - startMs);
    this.#longStepMs.add(endMs - startMs);
    this.#stepTimesByBatch.add(numDecodeTokens, endMs - startMs);
    this.#recentBatch.add(numDecodeTokens, startMs, endMs);
    if (stepS > 0 && numPromptTokens > 0) this.#prefillRate.add(numPromptTokens / stepS);
    if (stepS > 0 && numDecodeTokens > 0) this.#decodeRate.add(numDecodeTokens / stepS);
    const record: StepRecord = {
      index: this.#numSteps,
      startMs,
      endMs,
      computeMs,
      arrivals: this.#arrivals.slice(0, numArrivals),
      aborts: this.#aborts.slice(0, numAborts),
      plan: plan.runner,
      result,
      outputs: [...plan.outputs, ...outputs],
      kind,
      numPromptTokens,
      numDecodeTokens,
    };
    this.#arrivals = this.#arrivals.slice(numArrivals);
    this.#aborts = this.#aborts.slice(numAborts);
    return record;
  }

  #dispatch(outputs: readonly RequestOutput[]): void {
    for (const out of outputs) {
      const h = this.#held.get(out.requestId);
      if (h === undefined) bug(`output for request ${out.requestId}, which the engine does not hold`);
      if (out.finishReason !== null) {
        this.#held.delete(out.requestId);
        this.#snapshot = null;
        if (out.finishReason === 'stop' || out.finishReason === 'length') this.#outputLengths.add(h.req.outputTokens.length, out.finishReason === 'stop');
      }
      h.sink(out);
    }
  }

  /** The step loop broke: end everything held with an error, refuse new work, tell the listeners. */
  #fail(error: Error): void {
    this.#failure = error;
    this.#running = false;
    const steps = this.#log.records();
    console.error(`headroom: engine failure (a bug); the last ${steps.length} step records follow:`, error);
    for (const s of steps) console.error(JSON.stringify(s));
    const message = `the engine failed: ${error.message}`;
    const held = [...this.#held.values()];
    this.#held.clear();
    for (const { req, sink } of held) {
      try {
        sink({ requestId: req.id, newTokenIds: [], finishReason: 'error', message, timeline: { ...req.timeline, outcome: 'error' } });
      } catch (e) {
        console.error('headroom: a request sink threw while the engine was failing:', e);
      }
    }
    this.#notifyIdle();
    for (const fn of this.#fatalListeners) fn(error, steps);
  }

  #notifyIdle(): void {
    if (this.#held.size > 0 || this.#idleWaiters.length === 0) return;
    const waiters = this.#idleWaiters;
    this.#idleWaiters = [];
    for (const w of waiters) w();
  }

  #sleep(ms: number | null): Promise<void> {
    return new Promise((resolve) => {
      this.#wake = resolve;
      if (ms !== null) this.#timer = setTimeout(() => this.#signal(), ms);
    });
  }

  #signal(): void {
    if (this.#timer !== null) {
      clearTimeout(this.#timer);
      this.#timer = null;
    }
    const w = this.#wake;
    this.#wake = null;
    w?.();
  }
}
