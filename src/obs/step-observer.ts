// Turns engine step records into per-token and per-step metrics: TTFT, ITL, queue time, prompt and
// generation tokens, step time by kind. Runs after every step, O(outputs in the step).
//
// It reads only the step record and each output's timeline, never a live Request. A request's
// progress (when its last token came) is kept by id until its finishing output. A gap that spans
// a preemption is one long ITL: that is what the client saw.

import type { StepKind, StepRecord } from '../engine/step-record.ts';
import type { Metrics } from './metrics.ts';

export class StepMetrics {
  readonly #metrics: Metrics;
  /** Engine time of the last token seen, per request id still running. */
  readonly #lastTokenMs = new Map<string, number>();
  readonly #step: Readonly<Record<StepKind, { observe(v: number): void }>>;

  constructor(metrics: Metrics) {
    this.#metrics = metrics;
    const h = metrics.stepSeconds;
    this.#step = { prefill: h.labels({ kind: 'prefill' }), decode: h.labels({ kind: 'decode' }), mixed: h.labels({ kind: 'mixed' }) };
  }

  /** The engine's step observer (`engine.onStep`). */
  readonly onStep = (r: StepRecord): void => {
    const m = this.#metrics;
    for (const out of r.outputs) {
      const t = out.timeline;
      const n = out.newTokenIds.length;
      const last = this.#lastTokenMs.get(out.requestId);
      if (last === undefined && n > 0) {
        // The first output with tokens: the request's prompt, queue time and first token.
        m.promptTokens(t.numPromptTokens);
        if (t.scheduledMs !== null) m.queueTime.observe((t.scheduledMs - t.arrivalMs) / 1000);
        if (t.firstTokenMs !== null) m.ttft.observe((t.firstTokenMs - t.arrivalMs) / 1000);
        m.generationTokens(1);
        const more = n - 1;
        if (more > 0) this.#itl(more, r.endMs - (t.firstTokenMs ?? r.endMs));
        this.#lastTokenMs.set(out.requestId, r.endMs);
      } else if (last !== undefined && n > 0) {
        this.#itl(n, r.endMs - last);
        this.#lastTokenMs.set(out.requestId, r.endMs);
      }
      if (out.finishReason !== null) {
        this.#lastTokenMs.delete(out.requestId);
        m.requestFinished(t);
      }
    }
    this.#step[r.kind].observe((r.endMs - r.startMs) / 1000);
    m.iteration(r.numPromptTokens + r.numDecodeTokens);
  };

  #itl(numTokens: number, gapMs: number): void {
    const gapS = gapMs / 1000 / numTokens;
    for (let k = 0; k < numTokens; k++) this.#metrics.itl.observe(gapS);
    this.#metrics.generationTokens(numTokens);
  }
}
