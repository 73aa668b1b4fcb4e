// The admission seam: per request, admit now or refuse at once with a reason. The controller is
// a pure function of what is known at admission time: an AdmissionContext, a frozen engine
// snapshot, and the feature vector extracted from both (features.ts) — computed once by the API so
// the trace records exactly what the controller saw. It never sees the Request or any outcome.
//
// Today the only controller admits everything (the capacity bound and the drain gate live in the
// engine); the conformal controller plugs in here.

import type { Refusal } from '../backend/refusal.ts';
import type { EngineSnapshot } from '../engine/snapshot.ts';

/** What is known of a request when it is decided on. */
export interface AdmissionContext {
  readonly requestId: string;
  /** Backend clock, ms. */
  readonly arrivalMs: number;
  readonly sloMs: number;
  readonly numPromptTokens: number;
  /** Prompt tokens the prefix cache holds now (a pure peek: no pin, no LRU touch, no statistics). */
  readonly numCachedTokens: number;
  /** Per choice. */
  readonly maxTokens: number;
  readonly n: number;
  /** Chat messages (1 for a completion). */
  readonly numMessages: number;
  /** Time-to-first-token budget (`x-slo-ttft-ms`), or null when the request asks for none. */
  readonly ttftBudgetMs: number | null;
}

/** What the controller wants back with the outcome: its base predictions at decision time. */
export interface DecisionMemo {
  readonly e2ePredictionMs: number | null;
  readonly ttftPredictionMs: number | null;
  /** The budgets decided against (the under-capacity shortcut checks its own outcomes against them). */
  readonly sloMs: number;
  readonly ttftBudgetMs: number | null;
  /** The throughput arithmetic's E2E estimate at decision, no safety factor (decision/cold-start.ts learns the factor from it); null or absent: none. */
  readonly coldEstimateMs?: number | null;
  /** The prefill part of coldEstimateMs (the prompt work ahead and its own prefill), ms; absent: 0. */
  readonly coldPrefillMs?: number | null;
}

interface DecisionCommon {
  /** The E2E bound the decision used, ms (null: none computed). */
  readonly boundMs: number | null;
  /** Why, in a word (fits, explore, over_budget, ...), for traces and logs. */
  readonly reason: string;
  readonly memo: DecisionMemo | null;
}

export type AdmissionDecision = (DecisionCommon & { readonly admit: true }) | (DecisionCommon & { readonly admit: false; readonly refusal: Refusal });

/** An admitted choice's outcome, as the controller learns it. */
export interface AdmissionOutcome {
  /** E2E and TTFT, ms (null: never reached). */
  readonly e2eMs: number | null;
  readonly ttftMs: number | null;
  /** Aborted or failed: the latency is a lower bound. */
  readonly censored: boolean;
}

export interface AdmissionController {
  readonly name: string;
  /** Whether decide() reads the snapshot and features (false lets the API skip building them). */
  readonly needsFeatures: boolean;
  decide(ctx: AdmissionContext, snapshot: EngineSnapshot | null, features: Float64Array): AdmissionDecision;
  /**
   * Whether this request's bound alone fits its budgets on `snapshot`, changing nothing (no
   * counters, hysteresis, exploration or headroom state): what the gateway compares upstreams with
   * before it decides on one. Absent: the controller has no such bound to compare.
   */
  fits?(ctx: AdmissionContext, snapshot: EngineSnapshot | null, features: Float64Array): boolean;
  /** Feedback from an admitted request (once per choice). */
  observe(features: Float64Array, decision: AdmissionDecision, outcome: AdmissionOutcome): void;
  /** For /stats. */
  state(): Record<string, unknown>;
  /**
   * A throwaway twin whose decide() runs this controller's code with its own fresh decision state
   * (gates, quotas, counters) and this one's models read only: the server decides a few thousand
   * made-up requests with it before /ready, so the first real decisions do not pay for compiling
   * the decision path. Absent: nothing worth rehearsing.
   */
  rehearsal?(): AdmissionController;
  /**
   * Keep `companion`'s state with this controller's across restarts, under `name`: what the
   * controller's saved outcomes cannot rebuild (the engine's output-length and step-time estimates
   * its arithmetic reads). A warm start restores it at once; a cold one starts it empty. Absent: the
   * controller keeps nothing across a restart.
   */
  keep?(name: string, companion: Companion): void;
  /** Read what is kept on disk (persistent-state.ts); the server calls it once it holds its port, before anything else. */
  open?(): void;
}

/** State kept beside a controller's across restarts (AdmissionController.keep). */
export interface Companion {
  /** A JSON-serialisable copy of the state. */
  save(): unknown;
  /** Restores what save() returned in an earlier process; returns a phrase for the log line, throws when the data does not fit. */
  restore(data: unknown): string;
}

/** Admits everything: the behaviour before admission control exists, and the ablation's "off". */
export const admitAll: AdmissionController = {
  name: 'off',
  needsFeatures: false,
  decide: () => ({ admit: true, boundMs: null, reason: 'off', memo: null }),
  observe: () => undefined,
  state: () => ({ name: 'off' }),
};
