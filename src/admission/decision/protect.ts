// Keeping admitted requests on time: refuse a request whose admission would push one already
// running past its deadline.
//
// Every rule before this one asks whether the new request will finish inside its own budget. None
// asks what admitting it does to the requests already decoding: each step decodes the whole batch,
// so one more sequence makes every step longer for all of them, and its prefill takes steps' worth
// of compute from their decode. A request admitted onto an idle engine with a long output decodes
// beside everything admitted after it. On long-natural at 4× (results/admission/long-natural-fix),
// the admitted requests that finished late were such: admitted with 0 or 1 running, a bound of
// 3.1–3.9 s, 150–256 output tokens, and then 14–20 ms steps (a batch of 4–5) where they had started
// at 3–7 ms; their E2E 4.4–5.8 s against a 4 s budget. A 95% bound allows 5% past it; the p99 is
// made of those.
//
// The rule: for each running request i with deadline D_i and r_i output tokens still to come (the
// 90th percentile of outputs that ran as long as it has, at most its cap: EngineSnapshot
// .runningDeadlines), its finish by the engine's measured step time for the batch is
//   now + r_i · step(b)                           without the new request,
//   now + prefill + r_i · step(b + c)             with it,
// b the running and waiting requests, c the new request's choices, prefill its new prompt tokens at
// the measured prefill rate. Refuse when some i is on time without it (≤ D_i) and late with it.
// A request already late by this arithmetic does not block anyone: refusing others cannot save it.
// A point estimate, no calibrated factor: the bound still decides who is admitted; this only stops
// an admission from spending a running request's slack.
// O(running) per decision, no allocation.

import type { EngineSnapshot } from '../../engine/snapshot.ts';
import { stepMsAtBatch } from '../../engine/snapshot.ts';
import { FEATURE_NAMES } from '../features.ts';

const NEW_PREFILL = FEATURE_NAMES.indexOf('new_prefill_tokens');
const CHOICES = FEATURE_NAMES.indexOf('choices');
const RUNNING = FEATURE_NAMES.indexOf('running');
const WAITING = FEATURE_NAMES.indexOf('waiting');
const PREFILL_RATE = FEATURE_NAMES.indexOf('prefill_tokens_per_s');

/**
 * The deadline (engine time, ms) of a running request that admitting this one would make late by
 * the arithmetic above, or null when there is none — or nothing to tell by: no running deadlines
 * (a gateway's view), no step-time table, or an unmeasured prefill rate.
 */
export function delaysAdmitted(x: Float64Array, s: EngineSnapshot): number | null {
  const pairs = s.runningDeadlines;
  if (pairs === undefined || pairs.length === 0) return null;
  const prefillRate = x[PREFILL_RATE]!;
  if (!(prefillRate > 0)) return null;
  const batch = x[RUNNING]! + x[WAITING]!;
  const before = stepMsAtBatch(s.stepMsByBatch, Math.max(1, batch));
  const after = stepMsAtBatch(s.stepMsByBatch, batch + Math.max(1, x[CHOICES]!));
  if (before === null || after === null) return null;
  const prefillMs = (1000 * x[NEW_PREFILL]!) / prefillRate;
  for (let k = 0; k < pairs.length; k += 2) {
    const deadlineMs = pairs[k]!;
    const tokens = pairs[k + 1]!;
    if (s.atMs + tokens * before <= deadlineMs && s.atMs + prefillMs + tokens * after > deadlineMs) return deadlineMs;
  }
  return null;
}
