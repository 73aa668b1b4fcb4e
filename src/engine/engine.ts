// The engine's step loop: decide → execute → apply, one step at a time, forever.
//
//   plan = scheduler.schedule(now); result = await runner.execute(plan.runner); scheduler.update(plan, result, now)
//
// The loop sleeps when there is nothing to do and wakes on an arrival, an abort or a timer the
// scheduler asked for; it never busy-spins. It owns admission of new requests into memory (the
// capacity bound and the drain gate) but no policy: what runs when is the scheduler's.

import type { Request } from './request.ts';
import type { Runner, StepResult } from './runner/runner.ts';
import type { Scheduler, SchedulerPlan, SchedulerSnapshot } from './scheduler/scheduler.ts';

export interface EngineOptions {
  /** Most requests held in memory (waiting + running); far above what the scheduler runs at once. */
  readonly maxQueuedRequests: number;
  /** Clock in ms (tests inject one). */
  readonly now?: () => number;
}

export type SubmitResult = { readonly ok: true } | { readonly ok: false; readonly reason: 'capacity' | 'draining' };

export interface EngineStats {
  readonly numSteps: number;
  readonly numSubmitted: number;
  /** Steps whose runner call threw (bugs; each failed its requests with an error). */
  readonly numRunnerErrors: number;
  readonly refusals: Readonly<Record<'capacity' | 'draining', number>>;
  readonly draining: boolean;
  readonly scheduler: SchedulerSnapshot;
}

/** Called after every step with the plan, the result and the step's wall time (for metrics). */
export type StepObserver = (plan: SchedulerPlan, stepMs: number, computeMs: number | null) => void;

export class Engine {
  readonly runner: Runner;
  readonly scheduler: Scheduler;
  readonly #opts: EngineOptions;
  readonly #now: () => number;
  #wake: (() => void) | null = null;
  #timer: NodeJS.Timeout | null = null;
  #running = false;
  #loopDone: Promise<void> = Promise.resolve();
  #draining = false;
  #idleWaiters: (() => void)[] = [];
  #numSteps = 0;
  #numSubmitted = 0;
  #numRunnerErrors = 0;
  #refusals = { capacity: 0, draining: 0 };
  #observers: StepObserver[] = [];

  constructor(runner: Runner, scheduler: Scheduler, opts: EngineOptions) {
    if (!(opts.maxQueuedRequests >= 1)) throw new Error(`Engine: expected maxQueuedRequests ≥ 1, got ${opts.maxQueuedRequests}`);
    this.runner = runner;
    this.scheduler = scheduler;
    this.#opts = opts;
    this.#now = opts.now ?? (() => performance.now());
  }

  now(): number {
    return this.#now();
  }

  get draining(): boolean {
    return this.#draining;
  }

  onStep(fn: StepObserver): void {
    this.#observers.push(fn);
  }

  start(): void {
    if (this.#running) return;
    this.#running = true;
    this.#loopDone = this.#loop();
  }

  /** Stop the loop after the current step (requests still held are left as they are). */
  async stop(): Promise<void> {
    this.#running = false;
    this.#signal();
    await this.#loopDone;
  }

  submit(req: Request): SubmitResult {
    if (this.#draining) {
      this.#refusals.draining++;
      return { ok: false, reason: 'draining' };
    }
    if (this.scheduler.numUnfinished >= this.#opts.maxQueuedRequests) {
      this.#refusals.capacity++;
      return { ok: false, reason: 'capacity' };
    }
    this.#numSubmitted++;
    this.scheduler.add(req);
    this.#signal();
    return { ok: true };
  }

  /** The client left: the scheduler drops the request before the next step. */
  abort(req: Request): void {
    this.scheduler.abort(req);
    this.#signal();
  }

  /** Refuse new work from now on; resolves when every held request has finished. */
  drain(): Promise<void> {
    this.#draining = true;
    return this.whenIdle();
  }

  /** Resolves once nothing is waiting or running. */
  whenIdle(): Promise<void> {
    if (this.scheduler.numUnfinished === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idleWaiters.push(resolve));
  }

  stats(): EngineStats {
    return {
      numSteps: this.#numSteps,
      numSubmitted: this.#numSubmitted,
      numRunnerErrors: this.#numRunnerErrors,
      refusals: { ...this.#refusals },
      draining: this.#draining,
      scheduler: this.scheduler.snapshot(),
    };
  }

  async #loop(): Promise<void> {
    while (this.#running) {
      const t0 = this.#now();
      const plan = this.scheduler.schedule(t0);
      if (plan.runner.items.length === 0 && plan.runner.kvOps.length === 0) {
        this.#notifyIdle();
        await this.#sleep(plan.wakeAtMs === null ? null : Math.max(0, plan.wakeAtMs - t0));
        continue;
      }
      // A runner that throws has a bug; the requests in this step fail with an error instead of
      // hanging, and the loop goes on (the scheduler ends them; it retries only `no_kv_slot`).
      const result = await this.runner.execute(plan.runner).catch((e: unknown): StepResult => {
        this.#numRunnerErrors++;
        console.error('headroom: the model runner threw (a bug):', e);
        return { ok: false, reason: 'backend_error', message: e instanceof Error ? e.message : String(e) };
      });
      this.scheduler.update(plan, result, this.#now());
      this.#numSteps++;
      const stepMs = this.#now() - t0;
      for (const fn of this.#observers) fn(plan, stepMs, result.ok ? result.computeMs : null);
      this.#notifyIdle();
    }
  }

  #notifyIdle(): void {
    if (this.scheduler.numUnfinished > 0 || this.#idleWaiters.length === 0) return;
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
