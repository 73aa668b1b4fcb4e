// Admission traces: with `--trace-out FILE`, one JSON line per request choice — the features
// exactly as the admission controller saw them when it decided, the decision, then what happened.
// Written by the server itself at decision and finish time, never reconstructed from a client's
// records afterwards (features assembled later would describe a queue that never existed).
//
// A refused request leaves one row (outcome "refused"); an admitted one leaves a row per choice
// when it finishes. Aborted and failed rows are marked censored: their latency is a lower bound and
// must not be trained on as if observed. Each row names the rule that decided (`reason`: cold_start,
// bound, headroom, uncalibrated, delays_running, ...) and the throughput arithmetic's unmargined
// E2E estimate at the decision (`estimate_ms`), so a run's refusals can be read one by one.

import { createWriteStream } from 'node:fs';
import type { WriteStream } from 'node:fs';
import type { RequestTimeline } from '../engine/outputs.ts';
import type { AdmissionContext, AdmissionDecision } from './controller.ts';
import type { FeatureName } from './features.ts';
import { namedFeatures } from './features.ts';

export const TRACE_VERSION = 1;

export interface TraceRow {
  readonly v: number;
  readonly request_id: string;
  readonly choice: number;
  readonly arrival_ms: number;
  readonly slo_ms: number;
  readonly features: Record<FeatureName, number>;
  readonly admitted: boolean;
  /** The bound the decision used, ms (null: none computed). */
  readonly bound_ms: number | null;
  readonly outcome: 'stop' | 'length' | 'abort' | 'error' | 'refused';
  readonly ttft_ms: number | null;
  readonly e2e_ms: number | null;
  readonly output_tokens: number;
  readonly max_tokens: number;
  readonly censored: boolean;
  /** The rule that decided (AdmissionDecision.reason); absent in rows written before it was recorded. */
  readonly reason?: string;
  /** The throughput arithmetic's E2E estimate at the decision, no safety factor, ms; null: none (engine unmeasured). */
  readonly estimate_ms?: number | null;
  /** The prefill part of estimate_ms (the prompt work ahead and its own prefill), ms. */
  readonly estimate_prefill_ms?: number | null;
}

export class TraceWriter {
  readonly #out: WriteStream;
  #numRows = 0;

  constructor(path: string) {
    this.#out = createWriteStream(path, { flags: 'a' });
  }

  get numRows(): number {
    return this.#numRows;
  }

  refused(ctx: AdmissionContext, features: Float64Array, decision: AdmissionDecision | null): void {
    this.#write({ v: TRACE_VERSION, request_id: ctx.requestId, choice: 0, arrival_ms: ctx.arrivalMs, slo_ms: ctx.sloMs, features: namedFeatures(features), admitted: false, bound_ms: decision?.boundMs ?? null, outcome: 'refused', ttft_ms: null, e2e_ms: null, output_tokens: 0, max_tokens: ctx.maxTokens, censored: true, ...decided(decision) });
  }

  finished(ctx: AdmissionContext, features: Float64Array, decision: AdmissionDecision | null, choice: number, t: RequestTimeline): void {
    const outcome = t.outcome ?? 'error';
    this.#write({
      v: TRACE_VERSION,
      request_id: ctx.requestId,
      choice,
      arrival_ms: ctx.arrivalMs,
      slo_ms: ctx.sloMs,
      features: namedFeatures(features),
      admitted: true,
      bound_ms: decision?.boundMs ?? null,
      outcome,
      ttft_ms: t.firstTokenMs === null ? null : t.firstTokenMs - t.arrivalMs,
      e2e_ms: t.finishedMs === null ? null : t.finishedMs - t.arrivalMs,
      output_tokens: t.numOutputTokens,
      max_tokens: t.maxTokens,
      censored: outcome === 'abort' || outcome === 'error',
      ...decided(decision),
    });
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.#out.end(resolve));
  }

  #write(row: TraceRow): void {
    this.#numRows++;
    this.#out.write(`${JSON.stringify(row)}\n`);
  }
}

/** The decision's rule and arithmetic estimate, as trace fields; none without a decision. */
function decided(d: AdmissionDecision | null): Pick<TraceRow, 'reason' | 'estimate_ms' | 'estimate_prefill_ms'> {
  return d === null ? {} : { reason: d.reason, estimate_ms: d.memo?.coldEstimateMs ?? null, estimate_prefill_ms: d.memo?.coldPrefillMs ?? null };
}
