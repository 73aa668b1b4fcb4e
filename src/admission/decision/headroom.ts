// Under-capacity admission ("headroom"): admit a request the conformal bound would refuse when
// the engine visibly has room for it, and keep doing so only while that shortcut keeps its promise.
//
// Why: the conformal bound is calibrated over every regime it has seen, overload included, so on
// a lightly loaded engine it is loose (measured on the tiny llama model: bounds 3-5x the latency
// requests then had, 14% of arrivals refused at a quarter of the saturation rate). Below saturation
// the engine's own state says more than the marginal quantile does: nothing queued, a small running
// batch, and a measured step time.
//
// The rule (all must hold; every input is an admission-time fact, from the feature vector):
//   - the engine is warm (measured prefill and decode rates) and nothing is queued: no waiting
//     request and no prompt work ahead of this one — or, with `allowQueue`, a queue is allowed and
//     read instead: the waiting requests count as part of the batch, and the prompt work ahead of
//     this request as part of its prefill;
//   - the running batch (plus the waiting requests) plus this request's choices stays at or under
//     `maxRunning` (a quarter of the sequence slots by default: where, on the collected traces,
//     requests still met their budget);
//   (no KV condition: blocks the prefix cache holds count as used in the snapshot though they are
//   evictable — on the collected traces the free share fell to 0.2 on an engine running one request —
//   and a request that does not fit waits, which the empty-queue condition sees);
//   - margin × (its prefill, and the prompt work ahead of it, at the measured prefill rate +
//     max_tokens steps at the measured step time — or fewer: the 90th percentile of how long recent
//     outputs ran before EOS, when shorter, since where outputs end at EOS max_tokens is only a cap)
//     fits the E2E budget, and margin × the prefill part
//     fits the TTFT budget when one is asked. The step time is the engine's measured step time for
//     the batch this request joins — the running and waiting requests and its own choices, or the
//     batch the engine has decoded over the last seconds when larger (recentDecodeBatch: an arrival in
//     a lull of a shed overload saw 1.5–2 ms steps and then decoded at 2–4× that beside the requests
//     admitted after it) — from the snapshot's stepMsByBatch; where no engine measures that (a gateway), the larger of the last
//     few steps' average (the feature) and the long average over about a long request's decode (the
//     snapshot's longStepMs). The long average was the engine-side rule before, but an idle engine
//     runs no steps to forget an overload by, and with natural output lengths it held every idle
//     arrival's estimate over the budget for 50–110 s after one (results/admission/natural-default-5min).
//
// The self-check: the shortcut is a predictor like any other and is held to the same promise. Every
// request it admits reports back whether it met its budget; while the share of misses among the last
// `window` such outcomes exceeds α (once there are `minOutcomes` of them), the shortcut is off, except
// for one probe per `probeEveryMs` (the way back on, as exploration is for the bound).
// Complexity O(1) per decision and per outcome; no allocation.

import { FEATURE_NAMES } from '../features.ts';
import type { FeatureName } from '../features.ts';
import { stepMsAtBatch } from '../../engine/snapshot.ts';

export interface HeadroomOptions {
  /** The guarantee's miscoverage: the shortcut is off while its own miss rate exceeds this. */
  readonly alpha: number;
  /** Share of the sequence slots the running batch (with this request) may fill; 0.25 by default. */
  readonly maxRunningFraction?: number;
  /** Safety factor on the arithmetic estimate, ≥ 1; 1.5 by default. */
  readonly margin?: number;
  /** Shortcut outcomes remembered; 100 by default. */
  readonly window?: number;
  /** Outcomes before the miss rate can switch the shortcut off; 20 by default. */
  readonly minOutcomes?: number;
  /** While off, one probe per this many ms; 10,000 by default. */
  readonly probeEveryMs?: number;
  /** Admit with a queue, reading it (waiting requests join the batch, work ahead the prefill); false by default. */
  readonly allowQueue?: boolean;
}

/** The engine facts the rule reads besides the features. */
export interface HeadroomView {
  readonly maxSequences: number;
  /** The long step-time average, ms (EngineSnapshot.longStepMs); null or absent: the feature's alone. */
  readonly longStepMs?: number | null;
  /** How long recent outputs ran before EOS, 90th percentile (EngineSnapshot.outputTokensP90); null or absent: max_tokens. */
  readonly outputTokensP90?: number | null;
  /** Step time by decode batch (EngineSnapshot.stepMsByBatch); null or absent: the step-time averages. */
  readonly stepMsByBatch?: Float64Array | null;
  /** The decode batch over the last seconds (EngineSnapshot.recentDecodeBatch); absent: 0. */
  readonly recentDecodeBatch?: number;
}

const col = (name: FeatureName): number => FEATURE_NAMES.indexOf(name);
const NEW_PREFILL = col('new_prefill_tokens');
const MAX_TOKENS = col('max_tokens');
const CHOICES = col('choices');
const WORK_AHEAD = col('prompt_work_ahead');
const WAITING = col('waiting');
const RUNNING = col('running');
const STEP_MS = col('step_ms_avg');
const PREFILL_RATE = col('prefill_tokens_per_s');
const DECODE_RATE = col('decode_tokens_per_s');

export type HeadroomVerdict = 'admit' | 'probe' | 'no_room' | 'off';

/** A request's latency by throughput arithmetic, margin included, ms. */
export interface ArithmeticEstimate {
  readonly e2eMs: number;
  readonly ttftMs: number;
}

/**
 * margin × (the prompt work ahead of this request and its own prefill at the measured prefill rate,
 * + max_tokens steps — or `outputTokensP90` steps, how long recent outputs ran before EOS, when shorter —
 * at the step time measured for the batch it joins, or without that table the larger of the recent
 * and the long step time); the prefill part alone as
 * the TTFT. Null when the engine's rates are unmeasured, when a queue exists and `allowQueue` is
 * false, or when the running batch, the waiting requests and this request's choices together exceed
 * `maxRunning` (a request that must wait for a slot has no arithmetic estimate). Pure, O(1).
 */
export function arithmeticEstimate(
  x: Float64Array,
  o: { readonly maxRunning: number; readonly margin: number; readonly allowQueue: boolean; readonly longStepMs: number | null; readonly outputTokensP90?: number | null; readonly stepMsByBatch?: Float64Array | null; readonly recentDecodeBatch?: number },
): ArithmeticEstimate | null {
  const prefillRate = x[PREFILL_RATE]!;
  if (!(prefillRate > 0) || !(x[DECODE_RATE]! > 0) || !(x[STEP_MS]! > 0)) return null;
  if (!o.allowQueue && (x[WAITING]! !== 0 || x[WORK_AHEAD]! !== 0)) return null;
  if (x[RUNNING]! + x[WAITING]! + x[CHOICES]! > o.maxRunning) return null;
  const ttftMs = (1000 * (x[WORK_AHEAD]! + x[NEW_PREFILL]!)) / prefillRate;
  // The batch it decodes in: what runs and waits now with its own choices, or what the engine has
  // been decoding lately when more (an arrival in a lull decodes beside those admitted after it).
  const batch = Math.max(x[RUNNING]! + x[WAITING]! + x[CHOICES]!, o.recentDecodeBatch ?? 0);
  const stepMs = stepMsAtBatch(o.stepMsByBatch, batch) ?? Math.max(x[STEP_MS]!, o.longStepMs ?? 0);
  // Outputs that end at EOS stop short of max_tokens (EngineSnapshot.outputTokensP90): plan for that length when it is shorter.
  const outputTokens = Math.min(x[MAX_TOKENS]!, o.outputTokensP90 ?? Infinity);
  return { e2eMs: o.margin * (ttftMs + outputTokens * stepMs), ttftMs: o.margin * ttftMs };
}

/**
 * The least time this request can take on this engine, ms: its own new prompt tokens at the measured
 * prefill rate, plus one step at the recent step time for E2E (a request ends no sooner than its first
 * decode step). No margin and no work ahead of it: a lower bound, so a budget under it is missed
 * whatever the load. Null when the engine's rates are unmeasured. Pure, O(1).
 */
export function ownFloorMs(x: Float64Array, target: 'e2e' | 'ttft'): number | null {
  const prefillRate = x[PREFILL_RATE]!;
  const stepMs = x[STEP_MS]!;
  if (!(prefillRate > 0) || !(stepMs > 0)) return null;
  const prefillMs = (1000 * x[NEW_PREFILL]!) / prefillRate;
  return target === 'ttft' ? prefillMs : prefillMs + stepMs;
}

export class Headroom {
  readonly alpha: number;
  readonly maxRunningFraction: number;
  readonly margin: number;
  readonly minOutcomes: number;
  readonly probeEveryMs: number;
  readonly allowQueue: boolean;
  /** Ring of the last outcomes: 1 a miss, 0 met. */
  readonly #ring: Uint8Array;
  #next = 0;
  #size = 0;
  #misses = 0;
  #lastProbeMs = -Infinity;
  #numAdmitted = 0;
  #numProbes = 0;
  #numOutcomes = 0;
  #numMissesTotal = 0;

  constructor(o: HeadroomOptions) {
    const { alpha, maxRunningFraction = 0.25, margin = 1.5, window = 100, minOutcomes = 20, probeEveryMs = 10_000, allowQueue = false } = o;
    if (!(alpha > 0 && alpha < 1)) throw new RangeError(`Headroom: expected alpha in (0, 1), got ${String(alpha)}`);
    if (!(maxRunningFraction > 0 && maxRunningFraction <= 1)) throw new RangeError(`Headroom: expected maxRunningFraction in (0, 1], got ${String(maxRunningFraction)}`);
    if (!(margin >= 1 && Number.isFinite(margin))) throw new RangeError(`Headroom: expected margin ≥ 1, got ${String(margin)}`);
    if (!Number.isSafeInteger(window) || window < 1) throw new RangeError(`Headroom: expected window to be a positive integer, got ${String(window)}`);
    if (!Number.isSafeInteger(minOutcomes) || minOutcomes < 1 || minOutcomes > window) throw new RangeError(`Headroom: expected minOutcomes in [1, window], got ${String(minOutcomes)}`);
    if (!(probeEveryMs > 0)) throw new RangeError(`Headroom: expected probeEveryMs > 0, got ${String(probeEveryMs)}`);
    this.alpha = alpha;
    this.maxRunningFraction = maxRunningFraction;
    this.margin = margin;
    this.minOutcomes = minOutcomes;
    this.probeEveryMs = probeEveryMs;
    this.allowQueue = allowQueue;
    this.#ring = new Uint8Array(window);
  }

  /** A new shortcut with these options and no record: what a rehearsal decides with (controller.ts). */
  fresh(): Headroom {
    return new Headroom({ alpha: this.alpha, maxRunningFraction: this.maxRunningFraction, margin: this.margin, window: this.#ring.length, minOutcomes: this.minOutcomes, probeEveryMs: this.probeEveryMs, allowQueue: this.allowQueue });
  }

  /** Whether the shortcut's own record allows it now. */
  get enabled(): boolean {
    return this.#size < this.minOutcomes || this.#misses <= this.alpha * this.#size;
  }

  /**
   * The margin-inflated arithmetic estimate of this request's E2E, ms, when the engine has room
   * for it, else null. Pure: reads the features and the view, changes nothing.
   */
  estimate(x: Float64Array, view: HeadroomView): ArithmeticEstimate | null {
    return arithmeticEstimate(x, { maxRunning: Math.max(1, Math.floor(view.maxSequences * this.maxRunningFraction)), margin: this.margin, allowQueue: this.allowQueue, longStepMs: view.longStepMs ?? null, outputTokensP90: view.outputTokensP90 ?? null, stepMsByBatch: view.stepMsByBatch ?? null, recentDecodeBatch: view.recentDecodeBatch ?? 0 });
  }

  /** Decide for a request the bound did not admit. Takes a probe slot when it answers 'probe'. */
  decide(x: Float64Array, view: HeadroomView | null, budgetMs: number, ttftBudgetMs: number | null, nowMs: number): HeadroomVerdict {
    if (view === null) return 'no_room';
    const est = this.estimate(x, view);
    if (est === null || est.e2eMs > budgetMs || (ttftBudgetMs !== null && est.ttftMs > ttftBudgetMs)) return 'no_room';
    if (this.enabled) {
      this.#numAdmitted++;
      return 'admit';
    }
    if (nowMs - this.#lastProbeMs < this.probeEveryMs) return 'off';
    this.#lastProbeMs = nowMs;
    this.#numProbes++;
    return 'probe';
  }

  /** The outcome of a request this shortcut admitted (or probed): did it meet its budgets? */
  observe(met: boolean): void {
    const miss = met ? 0 : 1;
    if (this.#size === this.#ring.length) this.#misses -= this.#ring[this.#next]!;
    else this.#size++;
    this.#ring[this.#next] = miss;
    this.#misses += miss;
    this.#next = (this.#next + 1) % this.#ring.length;
    this.#numOutcomes++;
    this.#numMissesTotal += miss;
  }

  state(): Record<string, unknown> {
    return {
      enabled: this.enabled,
      numAdmitted: this.#numAdmitted,
      numProbes: this.#numProbes,
      numOutcomes: this.#numOutcomes,
      numMisses: this.#numMissesTotal,
      windowMisses: this.#misses,
      windowSize: this.#size,
      maxRunningFraction: this.maxRunningFraction,
      margin: this.margin,
      allowQueue: this.allowQueue,
    };
  }
}
