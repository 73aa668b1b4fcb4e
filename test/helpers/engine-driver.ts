// Drives an Engine directly (no HTTP): submit requests, collect their text and finish reasons.
import { Engine } from '../../src/engine/engine.ts';
import { Request } from '../../src/engine/request.ts';
import type { FinishReason } from '../../src/engine/request.ts';
import type { Runner } from '../../src/engine/runner/runner.ts';
import type { SchedulerConfig } from '../../src/engine/scheduler/factory.ts';
import { createScheduler } from '../../src/engine/scheduler/factory.ts';

export interface Job {
  readonly prompt: string | readonly number[];
  readonly maxTokens: number;
  readonly temperature?: number;
  readonly seed?: number;
  readonly sloMs?: number;
}

export interface Outcome {
  text: string;
  tokens: number[];
  reason: FinishReason | null;
  request: Request;
}

export function makeEngine(runner: Runner, config: SchedulerConfig): Engine {
  return new Engine(runner, createScheduler({ maxOutputTokens: 256, ...config }, runner.info), { maxQueuedRequests: 10_000 });
}

export function makeRequest(engine: Engine, job: Job, id: string, out: Outcome[]): Request {
  const runner = engine.runner;
  const o: Outcome = { text: '', tokens: [], reason: null, request: null as unknown as Request };
  const req = new Request({
    id,
    promptTokens: typeof job.prompt === 'string' ? runner.tokenize(job.prompt, true) : job.prompt,
    maxTokens: job.maxTokens,
    sampling: { temperature: job.temperature ?? 0, topP: 1, seed: job.seed ?? 1 },
    stop: [],
    ignoreEos: true,
    arrivalMs: engine.now(),
    sloMs: job.sloMs ?? 10_000,
    detokenizer: runner.detokenizer(),
    isEog: (t) => runner.isEog(t),
    onEvent: (ev) => {
      if (ev.type === 'delta') o.text += ev.text;
      else {
        o.reason = ev.reason;
        o.tokens = [...req.outputTokens];
      }
    },
  });
  o.request = req;
  out.push(o);
  return req;
}

/** Submit all jobs at once, run until idle, return outcomes in job order. */
export async function runJobs(engine: Engine, jobs: readonly Job[]): Promise<Outcome[]> {
  const out: Outcome[] = [];
  engine.start();
  for (const [i, job] of jobs.entries()) {
    const r = engine.submit(makeRequest(engine, job, `job-${i}`, out));
    if (!r.ok) throw new Error(`submit refused: ${r.reason}`);
  }
  await engine.whenIdle();
  return out;
}
