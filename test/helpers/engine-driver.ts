// The one test factory for engines, schedulers and requests (no HTTP): build requests from jobs,
// collect their text and finish reasons from the outputs the scheduler returns, and step a
// scheduler by hand or run an engine until idle.
import { ChoiceStream } from '../../src/api/choice-stream.ts';
import { Engine } from '../../src/engine/engine.ts';
import type { OutputSink } from '../../src/engine/engine.ts';
import type { RequestOutput } from '../../src/engine/outputs.ts';
import { Request } from '../../src/engine/request.ts';
import type { FinishReason } from '../../src/engine/request.ts';
import type { Runner } from '../../src/engine/runner/runner.ts';
import type { SchedulerConfig } from '../../src/engine/scheduler/factory.ts';
import { createScheduler } from '../../src/engine/scheduler/factory.ts';
import type { Scheduler, SchedulerPlan } from '../../src/engine/scheduler/scheduler.ts';

export interface Job {
  readonly prompt: string | readonly number[];
  readonly maxTokens: number;
  readonly temperature?: number;
  readonly seed?: number;
  readonly sloMs?: number;
  readonly tpotMs?: number;
}

export interface Outcome {
  text: string;
  tokens: number[];
  reason: FinishReason | null;
  request: Request;
}

/** What makeRequest needs: a runner (for its tokenizer) and the arrival time. */
export interface RequestFactoryContext {
  readonly runner: Runner;
  now(): number;
}

const sinks = new Map<string, OutputSink>();

export function makeEngine(runner: Runner, config: SchedulerConfig): Engine {
  return new Engine(runner, createScheduler({ maxOutputTokens: 256, ...config }, runner.info), { maxQueuedRequests: 10_000 });
}

/** A request for `job`, with an Outcome in `out` that its outputs fill (through `sinkFor` / `deliver`). */
export function makeRequest(ctx: RequestFactoryContext, job: Job, id: string, out: Outcome[]): Request {
  const tok = ctx.runner.tokenizer;
  const req = new Request({
    id,
    promptTokens: typeof job.prompt === 'string' ? tok.tokenize(job.prompt, true) : job.prompt,
    maxTokens: job.maxTokens,
    sampling: { temperature: job.temperature ?? 0, topP: 1, seed: job.seed ?? 1 },
    ignoreEos: true,
    arrivalMs: ctx.now(),
    sloMs: job.sloMs ?? 10_000,
    ...(job.tpotMs === undefined ? {} : { tpotMs: job.tpotMs }),
    isEog: (t) => tok.isEog(t),
  });
  const o: Outcome = { text: '', tokens: [], reason: null, request: req };
  const text = new ChoiceStream(tok, [], true);
  sinks.set(id, (ev) => {
    o.text += text.push(ev.newTokenIds);
    o.tokens.push(...ev.newTokenIds);
    if (ev.finishReason === null) return;
    if (ev.finishReason === 'length' || ev.finishReason === 'stop') o.text += text.flush();
    o.reason = ev.finishReason;
    sinks.delete(id);
  });
  out.push(o);
  return req;
}

/** The sink that fills the Outcome of a request built by makeRequest. */
export function sinkFor(req: Request): OutputSink {
  const s = sinks.get(req.id);
  if (s === undefined) throw new Error(`test bug: no outcome for request ${req.id}`);
  return s;
}

/** Hand outputs a scheduler returned to the outcomes of their requests. */
export function deliver(outputs: readonly RequestOutput[]): void {
  for (const o of outputs) sinkFor({ id: o.requestId } as Request)(o);
}

/**
 * One step by hand: schedule → (inspect the plan) → execute → update, outputs delivered, invariants
 * checked. The one step loop tests share.
 */
export async function stepOnce(s: Scheduler, runner: Runner, nowMs: number, inspect?: (plan: SchedulerPlan) => void): Promise<SchedulerPlan> {
  const plan = s.schedule(nowMs);
  deliver(plan.outputs);
  inspect?.(plan);
  deliver(s.update(plan, await runner.execute(plan.runner), nowMs));
  s.checkInvariants();
  return plan;
}

/** Submit all jobs at once, run until idle, return outcomes in job order. */
export async function runJobs(engine: Engine, jobs: readonly Job[]): Promise<Outcome[]> {
  const out: Outcome[] = [];
  engine.start();
  for (const [i, job] of jobs.entries()) {
    const req = makeRequest(engine, job, `job-${i}-${Math.random().toString(36).slice(2)}`, out);
    const r = engine.submit(req, sinkFor(req));
    if (!r.ok) throw new Error(`submit refused: ${r.reason}`);
  }
  await engine.whenIdle();
  return out;
}
