// Turns engine steps into per-token and per-step metrics: TTFT, ITL, queue time, prompt and
// generation tokens, step time by kind. Runs after every step, O(batch size), no allocation for a
// request already seen.
//
// A request's progress is remembered in a WeakMap keyed by the Request (its tokens counted so far
// and when the last one came), so nothing here outlives the request or needs a finish hook.
// A gap that spans a preemption is one long ITL: that is what the client saw.

import type { Request } from '../engine/request.ts';
import type { SchedulerPlan } from '../engine/scheduler/scheduler.ts';
import type { Metrics, StepKind } from './metrics.ts';

interface Progress {
  /** Output tokens already accounted for. */
  numOutputTokens: number;
  /** Engine time of the last token accounted for, ms. */
  lastTokenMs: number;
}

export class StepMetrics {
  readonly #metrics: Metrics;
  readonly #now: () => number;
  readonly #seen = new WeakMap<Request, Progress>();
  readonly #step: Readonly<Record<StepKind, { observe(v: number): void }>>;

  constructor(metrics: Metrics, now: () => number) {
    this.#metrics = metrics;
    this.#now = now;
    const h = metrics.stepSeconds;
    this.#step = { prefill: h.labels({ kind: 'prefill' }), decode: h.labels({ kind: 'decode' }), mixed: h.labels({ kind: 'mixed' }) };
  }

  /** The engine's step observer (`engine.onStep`). */
  readonly onStep = (plan: SchedulerPlan, stepMs: number): void => {
    const m = this.#metrics;
    const now = this.#now();
    let numPrefill = 0;
    let numDecode = 0;
    for (let i = 0; i < plan.scheduled.length; i++) {
      const req = plan.scheduled[i]!.request;
      const item = plan.runner.items[i];
      if (item !== undefined && (item.tokens.length > 1 || item.startPos < req.numPromptTokens)) numPrefill++;
      else numDecode++;

      let p = this.#seen.get(req);
      if (p === undefined) {
        p = { numOutputTokens: 0, lastTokenMs: 0 };
        this.#seen.set(req, p);
        m.promptTokens(req.numPromptTokens);
        if (req.admittedMs !== null) m.queueTime.observe((req.admittedMs - req.arrivalMs) / 1000);
      }
      const n = req.outputTokens.length;
      if (n <= p.numOutputTokens) continue;
      if (p.numOutputTokens === 0 && req.firstTokenMs !== null) {
        m.ttft.observe((req.firstTokenMs - req.arrivalMs) / 1000);
        p.lastTokenMs = req.firstTokenMs;
        p.numOutputTokens = 1;
        m.generationTokens(1);
      }
      const numNew = n - p.numOutputTokens;
      if (numNew > 0) {
        const gapS = (now - p.lastTokenMs) / 1000 / numNew;
        for (let k = 0; k < numNew; k++) m.itl.observe(gapS);
        m.generationTokens(numNew);
        p.numOutputTokens = n;
        p.lastTokenMs = now;
      }
    }
    const kind: StepKind = numPrefill === 0 ? 'decode' : numDecode === 0 ? 'prefill' : 'mixed';
    this.#step[kind].observe(stepMs / 1000);
  };
}
