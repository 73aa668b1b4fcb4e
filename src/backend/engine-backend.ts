// Engine mode's Backend: a generation job becomes one engine Request per choice, each with an
// output sink that turns the engine's per-step outputs into generation events. Ids are the job's
// id (n = 1) or `<id>.<index>`; choice i samples with seed + i, so greedy choices agree and
// sampled ones differ. Choices after the first are forks of it: the prompt is computed once.

import type { Engine } from '../engine/engine.ts';
import type { RequestOutput } from '../engine/outputs.ts';
import { Request } from '../engine/request.ts';
import type { EngineSnapshot } from '../engine/snapshot.ts';
import type { Tokenizer } from '../engine/tokenizer.ts';
import type { Clock } from '../engine/clock.ts';
import type { Backend, BackendHealth, BackendInfo, GenerateResult, Generation, GenerationEvent, GenerationJob } from './backend.ts';
import { EventQueue } from './event-queue.ts';
import { refusal } from './refusal.ts';
import { bug } from '../util/bug.ts';

export class EngineBackend implements Backend {
  readonly info: BackendInfo;
  readonly tokenizer: Tokenizer;
  readonly clock: Clock;
  readonly #engine: Engine;

  constructor(engine: Engine, clock: Clock) {
    this.#engine = engine;
    this.tokenizer = engine.runner.tokenizer;
    this.clock = clock;
    this.info = { mode: 'engine', modelId: engine.runner.info.modelId, contextTokens: engine.runner.info.contextTokens };
  }

  health(): BackendHealth {
    const failure = this.#engine.failure;
    return { ok: failure === null, draining: this.#engine.draining, failure: failure === null ? null : failure.message };
  }

  stats(): Record<string, unknown> {
    const info = this.#engine.runner.info;
    return {
      runner: { name: info.name, modelId: info.modelId, contextTokens: info.contextTokens, maxSequences: info.maxSequences, maxBatchTokens: info.maxBatchTokens, details: info.details },
      engine: this.#engine.stats(),
    };
  }

  snapshot(): EngineSnapshot {
    return this.#engine.snapshot();
  }

  peekCachedTokens(promptTokens: readonly number[]): number {
    return this.#engine.scheduler.peekCachedTokens(promptTokens);
  }

  generate(job: GenerationJob, signal: AbortSignal): GenerateResult {
    const engine = this.#engine;
    const queue = new EventQueue<GenerationEvent>();
    const ids = Array.from({ length: job.n }, (_, i) => (job.n === 1 ? job.id : `${job.id}.${i}`));
    let numOpen = job.n;
    const sinkFor = (index: number) => (out: RequestOutput) => {
      if (out.newTokenIds.length > 0) queue.push({ type: 'tokens', index, tokenIds: out.newTokenIds, ...(out.newLogprobs === undefined ? {} : { logprobs: out.newLogprobs }) });
      if (out.finishReason === null) return;
      queue.push({ type: 'finish', index, reason: out.finishReason, message: out.message, timeline: out.timeline });
      if (--numOpen === 0) queue.end();
    };
    const isEog = (t: number): boolean => this.tokenizer.isEog(t);
    let leader: Request | null = null;
    for (let i = 0; i < job.n; i++) {
      const req: Request = new Request({
        id: ids[i]!,
        promptTokens: job.promptTokens,
        maxTokens: job.maxTokens,
        sampling: { ...job.sampling, seed: (job.sampling.seed + i) >>> 0 },
        ignoreEos: job.ignoreEos,
        arrivalMs: job.arrivalMs,
        sloMs: job.sloMs,
        ...(job.tpotMs == null ? {} : { tpotMs: job.tpotMs }),
        isEog,
        ...(leader === null ? {} : { forkOf: leader }),
      });
      leader ??= req;
      const r = engine.submit(req, sinkFor(i));
      if (!r.ok) {
        // All choices or none: the ones already held go again.
        for (const id of ids.slice(0, i)) engine.abort(id);
        return { ok: false, refusal: refusal(r.reason) };
      }
    }
    const onAbort = (): void => {
      for (const id of ids) engine.abort(id);
    };
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
    const generation: Generation = {
      [Symbol.asyncIterator]: () => queue[Symbol.asyncIterator](),
      stopChoice: (index) => {
        const id = ids[index];
        if (id === undefined) bug(`stopChoice(${index}) of a generation with ${job.n} choices`);
        engine.abort(id, 'stop');
      },
    };
    return { ok: true, generation };
  }
}
