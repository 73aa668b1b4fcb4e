// The feature extractor cannot see the outcome: its inputs are an AdmissionContext and a frozen
// EngineSnapshot, and neither type (at any depth) holds a Request, a timeline, or a field that only
// exists after a request ran. Checked by the compiler: widening either type with such a field makes
// this file fail to typecheck (`npm test` runs tsc first).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { AdmissionContext } from '../../src/admission/controller.ts';
import { FEATURE_NAMES, NUM_FEATURES, extractFeatures, namedFeatures } from '../../src/admission/features.ts';
import type { RequestOutput, RequestTimeline } from '../../src/engine/outputs.ts';
import type { Request } from '../../src/engine/request.ts';
import type { EngineSnapshot } from '../../src/engine/snapshot.ts';

type Prev = [never, 0, 1, 2, 3, 4, 5];
/** Every property key reachable in T, to depth D. */
type DeepKeys<T, D extends number = 5> = [D] extends [never]
  ? never
  : T extends readonly (infer E)[]
    ? DeepKeys<E, Prev[D]>
    : T extends object
      ? { [K in keyof T]-?: K | DeepKeys<T[K], Prev[D]> }[keyof T]
      : never;
/** Every property type reachable in T, to depth D. */
type DeepValues<T, D extends number = 5> = [D] extends [never]
  ? never
  : T extends readonly (infer E)[]
    ? E | DeepValues<E, Prev[D]>
    : T extends object
      ? { [K in keyof T]-?: T[K] | DeepValues<T[K], Prev[D]> }[keyof T]
      : never;

/** Fields that exist only once a request has run (Request, RequestTimeline, RequestOutput). */
type OutcomeKeys = 'outputTokens' | 'firstTokenMs' | 'finishedMs' | 'finishReason' | 'outcome' | 'numOutputTokens' | 'newTokenIds' | 'timeline';
type Inputs = Parameters<typeof extractFeatures>;
type Assert<T extends true> = T;
type IsNever<T> = [T] extends [never] ? true : false;

// The extractor takes exactly (context, snapshot | null, out).
export type _Arity = Assert<Inputs['length'] extends 3 ? true : false>;
export type _Ctx = Assert<[Inputs[0]] extends [AdmissionContext] ? ([AdmissionContext] extends [Inputs[0]] ? true : false) : false>;
export type _Snap = Assert<[Inputs[1]] extends [EngineSnapshot | null] ? ([EngineSnapshot | null] extends [Inputs[1]] ? true : false) : false>;
// No outcome field anywhere inside either input.
export type _NoOutcomeKeys = Assert<IsNever<Extract<DeepKeys<AdmissionContext> | DeepKeys<EngineSnapshot>, OutcomeKeys>>>;
// No Request, timeline or output object anywhere inside either input.
type Reachable = DeepValues<AdmissionContext> | DeepValues<EngineSnapshot>;
export type _NoRequest = Assert<IsNever<Extract<Reachable, Request | RequestTimeline | RequestOutput>>>;

const ctx: AdmissionContext = { requestId: 'r', arrivalMs: 1000, sloMs: 4000, numPromptTokens: 300, numCachedTokens: 64, maxTokens: 100, n: 1, numMessages: 2, ttftBudgetMs: null };

function snapshot(over: Partial<EngineSnapshot> = {}): EngineSnapshot {
  return {
    numSteps: 10,
    atMs: 1000,
    numWaiting: 2,
    numRunning: 3,
    numFreeSeqIds: 12,
    maxSequences: 16,
    numBlocks: 512,
    numFreeBlocks: 128,
    blockSize: 16,
    waitingPromptTokens: 900,
    runningPromptTokens: 100,
    remainingDecodeTokens: 250,
    promptWorkByDeadline: [
      { deadlineMs: 2000, cumulativeTokens: 100 },
      { deadlineMs: 4500, cumulativeTokens: 600 },
      { deadlineMs: 5000, cumulativeTokens: 800 },
      { deadlineMs: 9000, cumulativeTokens: 1000 },
    ],
    avgStepMs: 25,
    longStepMs: null,
    outputTokensP90: null,
    prefillTokensPerS: 2000,
    decodeTokensPerS: 300,
    scheduler: {} as EngineSnapshot['scheduler'],
    ...over,
  };
}

test('features: request half, and work ahead counts only deadlines at or before this one', () => {
  const f = namedFeatures(extractFeatures(ctx, snapshot(), new Float64Array(NUM_FEATURES)));
  assert.equal(FEATURE_NAMES.length, NUM_FEATURES);
  assert.equal(f.prompt_tokens, 300);
  assert.equal(f.cached_tokens, 64);
  assert.equal(f.new_prefill_tokens, 236);
  assert.equal(f.max_tokens, 100);
  assert.equal(f.messages, 2);
  assert.equal(f.prompt_work_ahead, 800, 'deadline 5000 = arrival 1000 + 4000: ahead are the work due by 2000, 4500 and 5000');
  assert.equal(f.free_kv_fraction, 0.25);
  assert.equal(f.free_seq_fraction, 0.75);
  assert.equal(f.step_ms_avg, 25);
});

test('features: no snapshot (no engine state) zeroes the system half; unmeasured averages are 0', () => {
  const none = extractFeatures(ctx, null, new Float64Array(NUM_FEATURES));
  assert.deepEqual([...none.slice(7)], new Array(NUM_FEATURES - 7).fill(0));
  const cold = namedFeatures(extractFeatures(ctx, snapshot({ avgStepMs: null, prefillTokensPerS: null, decodeTokensPerS: null, promptWorkByDeadline: [] }), new Float64Array(NUM_FEATURES)));
  assert.equal(cold.step_ms_avg, 0);
  assert.equal(cold.prompt_work_ahead, 0);
});
