// The admission features: a fixed-order vector of numbers built from what is known when a request
// arrives — its AdmissionContext and a frozen EngineSnapshot — and nothing else. Neither argument
// can reach a Request or any outcome (TTFT, output length, finish), so a feature that leaks the
// future cannot be written without widening one of these two types (test/admission/features.test.ts
// asserts that from the types).
//
// No offered-arrival-rate feature, on purpose: under admission control the offered rate stays high
// while the queue stays empty, and a model that reads the rate refuses an idle engine after a burst.
// Every system feature here is a consequence of congestion (queued work, running batch, free KV,
// measured step time), which stays true under the intervention.

import type { EngineSnapshot } from '../engine/snapshot.ts';
import { promptTokensAhead } from '../engine/snapshot.ts';
import type { AdmissionContext } from './controller.ts';
import { bug } from '../util/bug.ts';

/** Feature names, in vector order. Adding one changes every trained artifact: they record this list. */
export const FEATURE_NAMES = [
  'prompt_tokens',
  'cached_tokens',
  'new_prefill_tokens',
  'max_tokens',
  'log_max_tokens',
  'choices',
  'messages',
  'prompt_work_ahead',
  'waiting',
  'running',
  'remaining_decode_tokens',
  'free_kv_fraction',
  'free_seq_fraction',
  'step_ms_avg',
  'prefill_tokens_per_s',
  'decode_tokens_per_s',
] as const;

export type FeatureName = (typeof FEATURE_NAMES)[number];
export const NUM_FEATURES = FEATURE_NAMES.length;

/**
 * Fill `out` (length NUM_FEATURES) with the features of one arriving request. Allocation-free;
 * an engine with no snapshot (gateway mode without scraped state) gets zeros for the system half.
 * Averages the engine has not measured yet are 0 (the server warms up before it is ready).
 */
export function extractFeatures(ctx: AdmissionContext, s: EngineSnapshot | null, out: Float64Array): Float64Array {
  if (out.length !== NUM_FEATURES) bug(`feature vector of length ${out.length}, expected ${NUM_FEATURES}`);
  const newPrefill = Math.max(0, ctx.numPromptTokens - ctx.numCachedTokens);
  out[0] = ctx.numPromptTokens;
  out[1] = ctx.numCachedTokens;
  out[2] = newPrefill;
  out[3] = ctx.maxTokens;
  out[4] = Math.log1p(ctx.maxTokens);
  out[5] = ctx.n;
  out[6] = ctx.numMessages;
  if (s === null) {
    out.fill(0, 7);
    return out;
  }
  // Prompt work EDF serves before this request: everything due no later than its own deadline.
  out[7] = promptTokensAhead(s, ctx.arrivalMs + ctx.sloMs);
  out[8] = s.numWaiting;
  out[9] = s.numRunning;
  out[10] = s.remainingDecodeTokens;
  out[11] = s.numBlocks === 0 ? 1 : s.numFreeBlocks / s.numBlocks;
  out[12] = s.maxSequences === 0 ? 1 : s.numFreeSeqIds / s.maxSequences;
  out[13] = s.avgStepMs ?? 0;
  out[14] = s.prefillTokensPerS ?? 0;
  out[15] = s.decodeTokensPerS ?? 0;
  return out;
}

/** The features as a name → value record (trace rows, /stats, debugging). */
export function namedFeatures(v: Float64Array): Record<FeatureName, number> {
  const r = {} as Record<FeatureName, number>;
  FEATURE_NAMES.forEach((n, i) => (r[n] = v[i]!));
  return r;
}
