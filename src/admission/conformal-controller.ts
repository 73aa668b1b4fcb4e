// The conformal admission controller: admit a request iff the calibrated upper bound on its
// latency fits its budget — E2E always, TTFT too when the request sets `x-slo-ttft-ms` — else
// refuse at once with 503 `slo_unattainable` and a Retry-After from the work in flight.
//
// A pure function of (context, snapshot, features) plus its own small state: the two bound models
// (predictor + online calibrator), the hysteresis regimes and the exploration quota (decision/).
// Decision order, per target:
//   budget below the request's own floor (its prefill at the measured prefill rate, plus one decode
//   step for E2E: decision/headroom.ts ownFloorMs)                              → refuse: no load,
//   bound or exploration can make it fit (an idle engine explored `x-slo-ms: 100` with
//   `max_tokens: 1000` and ran it for 18–101 s);
//   no calibrated bound yet (cold start: fewer outcomes than the small-n guard) → admit if the
//   throughput arithmetic (the queue ahead and its own prefill at the measured prefill rate, its
//   max_tokens — or, when shorter, how long recent outputs ran before EOS (90th percentile) — at the measured
//   step time, times a safety factor: 2 until its own outcomes calibrate one, decision/cold-start.ts)
//   fits the budget (reason cold_start): admitting
//   is how the bound gets its data, and refusing everything would keep it cold forever — but
//   admitting everything on a fresh server under overload gave goodput 0 and never calibrated
//   (every admitted request timed out, so no outcome ever came back);
//   bound fits the budget (inside 0.9× of it while shedding: hysteresis)       → admit;
//   engine idle or its rates unmeasured (with no bound yet: only idle), and
//   the exploration quota has a slot                                            → admit: explore;
// and then, for the whole request:
//   refused above, but the engine visibly has room for it (decision/headroom.ts) → admit: headroom;
//   otherwise                                                                   → refuse;
// and with `protectRunning`, an admission above that would make a running request finish past its
// deadline by the measured step times (decision/protect.ts) → refuse: delays_running.

import { refusal } from '../backend/refusal.ts';
import type { EngineSnapshot } from '../engine/snapshot.ts';
import type { BoundModel } from './bound-model.ts';
import type { OnlineBound } from './conformal/online-calibrator.ts';
import type { AdmissionContext, AdmissionController, AdmissionDecision, AdmissionOutcome, DecisionMemo } from './controller.ts';
import { AdmissionGate } from './decision/gate.ts';
import type { Headroom } from './decision/headroom.ts';
import { arithmeticEstimate, ownFloorMs } from './decision/headroom.ts';
import type { ArithmeticEstimate } from './decision/headroom.ts';
import type { GateDecision } from './decision/gate.ts';
import { delaysAdmitted } from './decision/protect.ts';
import { RetryAfter } from './decision/retry-after.ts';
import { COLD_START_MARGIN, ColdStartMargin } from './decision/cold-start.ts';
import type { SelfTrainer } from './self-train/self-trainer.ts';

export interface ConformalControllerOptions {
  /** Target miscoverage: 0.05 promises 95% of admitted requests inside their budget. */
  readonly alpha: number;
  readonly e2e: BoundModel;
  readonly ttft: BoundModel;
  readonly e2eGate?: AdmissionGate;
  readonly ttftGate?: AdmissionGate;
  readonly retryAfter?: RetryAfter;
  /** The under-capacity shortcut; none: the bound alone decides. */
  readonly headroom?: Headroom;
  /** Trains the E2E predictor from admitted outcomes and swaps it in (self-train/); none: the E2E model stays as built. */
  readonly selfTrainer?: SelfTrainer;
  /** The cold-start rule's E2E safety factor, learned from admitted outcomes; default: a fresh one at `alpha`. */
  readonly coldStart?: ColdStartMargin;
  /**
   * Once the E2E bound is calibrated, bound E2E by the lesser of it and the arithmetic bound (the
   * estimate times the factor's quantile at α/2): valid at α only when `e2e` is calibrated at α/2
   * (the factory does both; decision/cold-start.ts).
   */
  readonly arithmeticBound?: boolean;
  /** Refuse a request that would fit but would make a running request late (decision/protect.ts); default false. */
  readonly protectRunning?: boolean;
}

export class ConformalController implements AdmissionController {
  readonly name = 'conformal';
  readonly needsFeatures = true;
  readonly #o: ConformalControllerOptions;
  readonly #e2eGate: AdmissionGate;
  readonly #ttftGate: AdmissionGate;
  readonly #retry: RetryAfter;
  readonly #coldStart: ColdStartMargin;
  #numDecisions = 0;
  /** The latest arrival decided so far, ms: the quotas' clock (see decide). */
  #clockMs = -Infinity;
  #numRefused = 0;
  readonly #reasons = new Map<string, number>();

  constructor(o: ConformalControllerOptions) {
    if (!(o.alpha > 0 && o.alpha < 1)) throw new Error(`ConformalController: expected alpha in (0, 1), got ${o.alpha}`);
    this.#o = o;
    this.#e2eGate = o.e2eGate ?? new AdmissionGate();
    this.#ttftGate = o.ttftGate ?? new AdmissionGate();
    this.#retry = o.retryAfter ?? new RetryAfter();
    this.#coldStart = o.coldStart ?? new ColdStartMargin(o.alpha);
  }

  decide(ctx: AdmissionContext, snapshot: EngineSnapshot | null, features: Float64Array): AdmissionDecision {
    this.#numDecisions++;
    // Requests are decided in another order than they arrived (a body, a tokenization or a wait in
    // the flow-control queue takes longer for one than for the next), so arrival times are not
    // monotone here: under a 2.4/s overload an arrival 4.5 ms earlier than the last one decided
    // reached the exploration quota, whose clock must not run backwards, and failed with a 500.
    // The quotas and probes count on the latest arrival decided so far: monotone, on the same clock,
    // and never later than now.
    this.#clockMs = Math.max(this.#clockMs, ctx.arrivalMs);
    // The throughput arithmetic, once per decision: the cold-start rule, the arithmetic bound and the memo read it.
    const est = unmarginedEstimate(features, snapshot);
    const memo: DecisionMemo = {
      e2ePredictionMs: this.#o.e2e.predict(features),
      ttftPredictionMs: ctx.ttftBudgetMs === null ? null : this.#o.ttft.predict(features),
      sloMs: ctx.sloMs,
      ttftBudgetMs: ctx.ttftBudgetMs,
      coldEstimateMs: est?.e2eMs ?? null,
      coldPrefillMs: est?.ttftMs ?? null,
    };
    const e2e = this.#gate(this.#o.e2e, this.#e2eGate, memo.e2ePredictionMs, ctx.sloMs, 'e2e', snapshot, features, est);
    let verdict = e2e;
    if (verdict.admit && ctx.ttftBudgetMs !== null) verdict = this.#gate(this.#o.ttft, this.#ttftGate, memo.ttftPredictionMs, ctx.ttftBudgetMs, 'ttft', snapshot, features, est);
    let reason: string = verdict.reason;
    // Whether admitting it would make a running request late (decision/protect.ts): asked only of a
    // request something would admit, and before the shortcut spends a probe on it.
    const delays = (): boolean => this.#o.protectRunning === true && snapshot !== null && delaysAdmitted(features, snapshot) !== null;
    if (verdict.admit && delays()) reason = 'delays_running';
    else if (!verdict.admit && verdict.reason !== 'below_floor' && this.#o.headroom !== undefined && !delays()) {
      const h = this.#o.headroom.decide(features, snapshot, ctx.sloMs, ctx.ttftBudgetMs, this.#clockMs);
      if (h === 'admit' || h === 'probe') reason = h === 'admit' ? 'headroom' : 'headroom_probe';
    }
    this.#reasons.set(reason, (this.#reasons.get(reason) ?? 0) + 1);
    if ((verdict.admit && reason !== 'delays_running') || reason === 'headroom' || reason === 'headroom_probe') return { admit: true, boundMs: e2e.boundMs, reason, memo };
    this.#numRefused++;
    const retryAfterS = snapshot === null ? this.#retry.minS : this.#retry.fromWork(snapshot);
    const what = verdict === e2e ? 'end-to-end latency' : 'time to first token';
    const budget = verdict === e2e ? ctx.sloMs : ctx.ttftBudgetMs!;
    const message =
      reason === 'delays_running'
        ? `Admitting this request now would make a request already running finish past its deadline (by the engine's measured step times), though it would fit its own budget of ${ctx.sloMs} ms; retry after ${retryAfterS} s.`
        : verdict.reason === 'below_floor'
        ? `This request's budget of ${budget} ms for its ${what} is below what its own prefill${verdict === e2e ? ' and one decode step' : ''} take on this engine at its measured rates (${Math.ceil(ownFloorMs(features, verdict === e2e ? 'e2e' : 'ttft')!)} ms), whatever the load; raise the budget or shorten the prompt.`
        : verdict.boundMs === null
        ? `This request's ${what} cannot be bounded yet (the latency bound is still calibrating) and the engine's measured rates put it past its budget of ${budget} ms; retry after ${retryAfterS} s.`
        : `This request's ${what} cannot be bounded inside its budget now (bound ${Math.round(verdict.boundMs)} ms, budget ${budget} ms at ${(1 - this.#o.alpha) * 100}% confidence); retry after ${retryAfterS} s.`;
    return { admit: false, boundMs: e2e.boundMs, reason, memo, refusal: refusal('conformal', { message, retryAfterS }) };
  }

  fits(ctx: AdmissionContext, snapshot: EngineSnapshot | null, features: Float64Array): boolean {
    const est = unmarginedEstimate(features, snapshot);
    const fits = (model: BoundModel, budgetMs: number, target: 'e2e' | 'ttft'): boolean => {
      const floorMs = ownFloorMs(features, target);
      if (floorMs !== null && floorMs > budgetMs) return false;
      const bound = this.#bound(model, model.predict(features), budgetMs, target, est);
      return bound.status === 'uncalibrated' ? coldStartFits(snapshot, features, est, budgetMs, target, this.#coldStart) : bound.upper <= budgetMs;
    };
    return fits(this.#o.e2e, ctx.sloMs, 'e2e') && (ctx.ttftBudgetMs === null || fits(this.#o.ttft, ctx.ttftBudgetMs, 'ttft'));
  }

  rehearsal(): AdmissionController {
    const o = this.#o;
    // The bound models and the cold-start factor are only read by decide(); observe() is never called on the twin.
    return new ConformalController({ alpha: o.alpha, e2e: o.e2e, ttft: o.ttft, retryAfter: this.#retry, coldStart: this.#coldStart, arithmeticBound: o.arithmeticBound === true, protectRunning: o.protectRunning === true, ...(o.headroom === undefined ? {} : { headroom: o.headroom.fresh() }) });
  }

  observe(features: Float64Array, decision: AdmissionDecision, outcome: AdmissionOutcome): void {
    const memo = decision.memo;
    if (memo === null) return;
    if (this.#o.headroom !== undefined && (decision.reason === 'headroom' || decision.reason === 'headroom_probe')) {
      const met = metBudgets(memo, outcome);
      if (met !== null) this.#o.headroom.observe(met);
    }
    if (outcome.e2eMs !== null) {
      this.#o.e2e.observe(features, memo.e2ePredictionMs, outcome.e2eMs, outcome.censored);
      this.#coldStart.observe(memo.coldEstimateMs ?? null, outcome.e2eMs, outcome.censored, memo.sloMs, memo.coldPrefillMs ?? 0);
      this.#o.selfTrainer?.observe(features, outcome.e2eMs, outcome.censored, decision.boundMs);
    }
    // Every admitted request teaches the TTFT model, asked for or not: its budget is the client's, its latency is the engine's.
    if (outcome.ttftMs !== null) this.#o.ttft.observe(features, memo.ttftPredictionMs ?? this.#o.ttft.predict(features), outcome.ttftMs, false);
  }

  state(): Record<string, unknown> {
    return {
      name: this.name,
      alpha: this.#o.alpha,
      numDecisions: this.#numDecisions,
      numRefused: this.#numRefused,
      reasons: Object.fromEntries(this.#reasons),
      e2e: { ...this.#o.e2e.state(), hysteresis: this.#e2eGate.hysteresis.state, explorationGrants: this.#e2eGate.exploration.numGrants, coldStart: this.#coldStart.state(), arithmeticBound: this.#o.arithmeticBound === true, selfTraining: this.#o.selfTrainer?.state() ?? null },
      ttft: { ...this.#o.ttft.state(), hysteresis: this.#ttftGate.hysteresis.state, explorationGrants: this.#ttftGate.exploration.numGrants },
      headroom: this.#o.headroom?.state() ?? null,
    };
  }

  /** The bound in force: the model's, or for E2E with `arithmeticBound` the lesser of it and the arithmetic bound once both exist. */
  #bound(model: BoundModel, yhat: number | null, budgetMs: number, target: 'e2e' | 'ttft', est: ArithmeticEstimate | null): OnlineBound {
    const bound = model.bound(yhat);
    if (target !== 'e2e' || this.#o.arithmeticBound !== true || bound.status !== 'calibrated') return bound;
    const arithmetic = est === null ? null : this.#coldStart.halfBound(est.e2eMs, budgetMs, est.ttftMs);
    return arithmetic === null || !(arithmetic < bound.upper) ? bound : { status: 'calibrated', upper: arithmetic };
  }

  #gate(model: BoundModel, gate: AdmissionGate, yhat: number | null, budgetMs: number, target: 'e2e' | 'ttft', snapshot: EngineSnapshot | null, features: Float64Array, est: ArithmeticEstimate | null): GateDecision {
    const bound = this.#bound(model, yhat, budgetMs, target, est);
    const floorMs = ownFloorMs(features, target);
    if (floorMs !== null && floorMs > budgetMs) return { admit: false, reason: 'below_floor', boundMs: bound.status === 'calibrated' ? bound.upper : null, explored: null };
    if (bound.status === 'uncalibrated' && coldStartFits(snapshot, features, est, budgetMs, target, this.#coldStart)) return { admit: true, reason: 'cold_start', boundMs: null, explored: 'uncalibrated' };
    return gate.decide({ bound, budgetMs, nowMs: this.#clockMs, engine: snapshot });
  }
}

/**
 * The cold-start rule: with no calibrated bound, whether the throughput arithmetic `est` times a safety
 * factor says this request fits its budget — for E2E the factor `e2e` learned (decision/cold-start.ts),
 * for TTFT the fixed COLD_START_MARGIN — true too when the engine is unmeasured: nothing better is
 * known, and the exploration quota's 'cold' case would admit it anyway. No sequence-slot condition:
 * under overload the prompt work queued ahead already outgrows any budget, and a scheduler with few
 * slots (FIFO runs one request at a time) serves a short queue in time.
 */
function coldStartFits(snapshot: EngineSnapshot | null, features: Float64Array, est: ArithmeticEstimate | null, budgetMs: number, target: 'e2e' | 'ttft', e2e: ColdStartMargin): boolean {
  if (snapshot === null || snapshot.decodeTokensPerS === null || features.length === 0) return true;
  if (est === null) return false;
  return target === 'e2e' ? e2e.fits(est.e2eMs, budgetMs, est.ttftMs) : COLD_START_MARGIN * est.ttftMs <= budgetMs;
}

/** The throughput arithmetic with no safety factor and no slot condition; null when the engine's rates are unmeasured. */
function unmarginedEstimate(features: Float64Array, snapshot: EngineSnapshot | null): ArithmeticEstimate | null {
  if (snapshot === null || features.length === 0) return null;
  return arithmeticEstimate(features, { maxRunning: Infinity, margin: 1, allowQueue: true, longStepMs: snapshot.longStepMs, outputTokensP90: snapshot.outputTokensP90, stepMsByBatch: snapshot.stepMsByBatch ?? null, recentDecodeBatch: snapshot.recentDecodeBatch ?? 0 });
}

/**
 * Whether an admitted request met every budget it was decided against; null when its outcome
 * cannot tell (cut short before any budget ran out). A censored latency is a lower bound: past a
 * budget it is a miss whatever the true latency was.
 */
export function metBudgets(memo: DecisionMemo, outcome: AdmissionOutcome): boolean | null {
  const ttftMissed = memo.ttftBudgetMs !== null && outcome.ttftMs !== null && outcome.ttftMs > memo.ttftBudgetMs;
  const e2eMissed = outcome.e2eMs !== null && outcome.e2eMs > memo.sloMs;
  if (ttftMissed || e2eMissed) return false;
  if (outcome.censored || outcome.e2eMs === null) return null;
  return memo.ttftBudgetMs === null || outcome.ttftMs !== null;
}
