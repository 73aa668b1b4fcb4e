// Natural output lengths: requests that end at EOS, at a length nobody — the admission controller
// least of all — knows when they arrive.
//
// Every other workload sends ignore_eos and runs each request to its max_tokens, so the output
// length is a number admission reads (the max_tokens feature). Real outputs end at EOS. With a
// random-weights model (or the mock) that can be reproduced honestly: sample at temperature 1 with
// a logit bias b on the EOS token. The logits are nearly flat, so each step ends with probability
//
//   p = e^b / (e^b + V − 1)          (V: vocabulary size)
//
// and the output length, EOS included, is geometric with mean 1/p; max_tokens is only a cap. Solving
// for b at a target mean m gives b = ln(p·(V − 1) / (1 − p)) with p = 1/m. The bias is the same for
// every request of a workload, so the request carries nothing about its own length: a per-request
// seed decides it inside the sampler, where no admission feature can look (AdmissionContext holds
// no sampling parameters).
//
// On a trained model the logits are far from flat and the realised mean is not m; the mechanism
// still holds (the length is unknown at admission), only the mean must be measured, not assumed.

/** The model facts the bias needs: which token ends generation and how many tokens there are. */
export interface EosTarget {
  /** The end-of-sequence (end-of-turn) token the bias is put on. */
  readonly eosTokenId: number;
  /** Vocabulary size V: the flat-logits share of EOS is e^b / (e^b + V − 1). */
  readonly vocabSize: number;
}

/** What a natural-length request sends instead of ignore_eos. */
export interface NaturalSampling {
  /** Always 1: the bias formula assumes the logits unscaled. */
  readonly temperature: number;
  /** Sent as `logit_bias`: the EOS id → b. */
  readonly logitBias: Readonly<Record<string, number>>;
  /** Sent as `seed`: drawn per request, so a run is reproducible and requests differ. */
  readonly seed: number;
}

/** The EOS bias b that makes the mean output length (EOS included) `meanTokens` under flat logits. */
export function eosBias(meanTokens: number, vocabSize: number): number {
  if (!(meanTokens > 1)) throw new Error(`natural length: expected a mean output length > 1 token, got ${meanTokens}`);
  if (!(Number.isInteger(vocabSize) && vocabSize > 1)) throw new Error(`natural length: expected an integer vocabulary size > 1, got ${vocabSize}`);
  const p = 1 / meanTokens;
  return Math.log((p * (vocabSize - 1)) / (1 - p));
}

/** Per-step probability of EOS under flat logits at temperature 1 with bias `bias`. */
export function eosProbability(bias: number, vocabSize: number): number {
  const w = Math.exp(bias);
  return w / (w + vocabSize - 1);
}

/**
 * Mean and standard deviation of min(L, cap), L geometric on {1, 2, ...} with success `p`: the
 * output length a capped request is expected to have (cap null: no cap). Tests size their
 * tolerance from the standard deviation, never from a fixed number.
 */
export function cappedGeometric(p: number, cap: number | null): { mean: number; sd: number } {
  if (!(p > 0 && p <= 1)) throw new Error(`natural length: expected p in (0, 1], got ${p}`);
  const q = 1 - p;
  if (cap === null) return { mean: 1 / p, sd: Math.sqrt(q) / p };
  // E[min(L,c)] = Σ_{k=0}^{c−1} q^k; E[min(L,c)²] = Σ_{k=1}^{c} (2k − 1) q^(k−1).
  let mean = 0;
  let second = 0;
  let qk = 1;
  for (let k = 1; k <= cap; k++) {
    mean += qk;
    second += (2 * k - 1) * qk;
    qk *= q;
  }
  return { mean, sd: Math.sqrt(Math.max(0, second - mean * mean)) };
}
