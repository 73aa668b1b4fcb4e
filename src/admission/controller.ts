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
}

export type AdmissionDecision =
  | { readonly admit: true; /** The latency bound the decision used, ms (null: none computed). */ readonly boundMs: number | null }
  | { readonly admit: false; readonly boundMs: number | null; readonly refusal: Refusal };

export interface AdmissionController {
  readonly name: string;
  decide(ctx: AdmissionContext, snapshot: EngineSnapshot | null, features: Float64Array): AdmissionDecision;
}

/** Admits everything: the behaviour before admission control exists, and the ablation's "off". */
export const admitAll: AdmissionController = {
  name: 'off',
  decide: () => ({ admit: true, boundMs: null }),
};
