// A feature vector for admission tests: a warm engine (prefill at 2,000 tok/s, 10 ms steps,
// 200 tok/s decode, two running) and a 200-token prompt asking for 100 tokens, with `over` on top.
import { FEATURE_NAMES, type FeatureName } from '../../src/admission/features.ts';

export function warmFeatures(over: Partial<Record<FeatureName, number>> = {}): Float64Array {
  const base: Partial<Record<FeatureName, number>> = { prompt_tokens: 200, new_prefill_tokens: 200, max_tokens: 100, choices: 1, messages: 1, running: 2, step_ms_avg: 10, prefill_tokens_per_s: 2000, decode_tokens_per_s: 200 };
  const all = { ...base, ...over };
  return Float64Array.from(FEATURE_NAMES, (n) => all[n] ?? 0);
}
