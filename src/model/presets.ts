// Model shapes. All are llama-architecture, random-weight models with a byte-fallback SPM vocab.
//
// - micro: ~0.1M parameters besides the embeddings; for tests around real vocabularies
//   (`model make --vocab-from`), where a 150k-token embedding table at tiny's width is 115 MB.
// - tiny: ~19M parameters, ~37 MiB as F16; fast enough for tests and the default `npm start`.
// - small: ~70M parameters, sized so that a 600-token prefill and batch-8 decode on 2 cores make a
//   2–4 s SLO meaningful (see results/calibration/).
// - 0.5b: Qwen2.5-0.5B shapes (dim 896, 24 layers, 14 heads, 2 KV heads, FFN 4864, vocab 151936),
//   ~500 MB as Q8_0; for benchmarks.

export interface ModelShape {
  readonly embeddingLength: number;
  readonly blockCount: number;
  readonly feedForwardLength: number;
  readonly headCount: number;
  readonly headCountKv: number;
  readonly vocabSize: number;
  /** Trained context length written to the GGUF (the runner's default n_ctx is capped by it). */
  readonly contextLength: number;
  readonly ropeFreqBase: number;
  readonly rmsEps: number;
}

export const PRESET_NAMES = ['micro', 'tiny', 'small', '0.5b'] as const;
export type PresetName = (typeof PRESET_NAMES)[number];

export const PRESETS: Readonly<Record<PresetName, ModelShape>> = {
  micro: {
    embeddingLength: 64,
    blockCount: 2,
    feedForwardLength: 128,
    headCount: 2,
    headCountKv: 1,
    vocabSize: 8000,
    contextLength: 8192,
    ropeFreqBase: 10000,
    rmsEps: 1e-5,
  },
  tiny: {
    embeddingLength: 384,
    blockCount: 10,
    feedForwardLength: 1024,
    headCount: 6,
    headCountKv: 2,
    vocabSize: 8000,
    contextLength: 8192,
    ropeFreqBase: 10000,
    rmsEps: 1e-5,
  },
  small: {
    embeddingLength: 640,
    blockCount: 12,
    feedForwardLength: 1728,
    headCount: 10,
    headCountKv: 2,
    vocabSize: 32000,
    contextLength: 8192,
    ropeFreqBase: 10000,
    rmsEps: 1e-5,
  },
  '0.5b': {
    embeddingLength: 896,
    blockCount: 24,
    feedForwardLength: 4864,
    headCount: 14,
    headCountKv: 2,
    vocabSize: 151936,
    contextLength: 32768,
    ropeFreqBase: 1000000,
    rmsEps: 1e-6,
  },
};

export function isPresetName(s: string): s is PresetName {
  return (PRESET_NAMES as readonly string[]).includes(s);
}

/** Parameter count of a shape with tied embeddings (no output.weight). */
export function countParams(s: ModelShape): number {
  const headDim = s.embeddingLength / s.headCount;
  const kvDim = headDim * s.headCountKv;
  const perBlock =
    2 * s.embeddingLength +
    2 * s.embeddingLength * s.embeddingLength +
    2 * s.embeddingLength * kvDim +
    3 * s.embeddingLength * s.feedForwardLength;
  return s.vocabSize * s.embeddingLength + s.embeddingLength + s.blockCount * perBlock;
}
