// Writes a llama-architecture GGUF with seeded random weights and either a byte-fallback SPM
// vocabulary of its own or a real model's vocabulary copied from another GGUF (`vocabFrom`: every
// `tokenizer.*` key byte for byte, so llama.cpp tokenizes, templates and stops exactly as it does
// for that model; the shape's vocabSize becomes the vocabulary's). Deterministic: the same shape,
// quant, seed and vocabulary give the same bytes.
import { GgmlType, writeGguf } from './gguf-writer.ts';
import type { KvValue, TensorSpec } from './gguf-writer.ts';
import { constantF32, randomTensor, streamSeed } from './random-weights.ts';
import { buildSpmVocab } from './spm-vocab.ts';
import { readGgufMetadata } from './gguf-reader.ts';
import { countParams } from './presets.ts';
import type { ModelShape } from './presets.ts';

export type Quant = 'f16' | 'q8_0';
export const QUANTS: readonly Quant[] = ['f16', 'q8_0'];

export interface MakeModelOptions {
  readonly shape: ModelShape;
  readonly quant: Quant;
  readonly seed: number;
  /** Output path of the .gguf file. */
  readonly out: string;
  /** general.name in the GGUF. */
  readonly name?: string;
  /** Standard deviation of the random weights (default 0.02). */
  readonly weightStd?: number;
  /** Override the EOS token id (tests use it to make a known token end generation). */
  readonly eosTokenId?: number;
  /** A chat template to store as tokenizer.chat_template (replaces one copied with `vocabFrom`). */
  readonly chatTemplate?: string;
  /** A GGUF whose tokenizer (every `tokenizer.*` key, the chat template included) the model takes. */
  readonly vocabFrom?: string;
}

/** The tokenizer keys of another GGUF, as stored, and its vocabulary size. */
function foreignTokenizer(path: string): { keys: Map<string, KvValue>; vocabSize: number } {
  const meta = readGgufMetadata(path);
  const keys = new Map<string, KvValue>();
  for (const [key, e] of meta.entries) {
    if (key.startsWith('tokenizer.')) keys.set(key, { type: 'raw', ggufType: e.type, bytes: e.raw });
  }
  const tokens = meta.entries.get('tokenizer.ggml.tokens')?.value;
  if (!Array.isArray(tokens) || tokens.length === 0) throw new Error(`--vocab-from: ${path} has no tokenizer.ggml.tokens`);
  return { keys, vocabSize: tokens.length };
}

export interface MadeModel {
  readonly path: string;
  readonly bytes: number;
  readonly numParams: number;
}

function validateShape(s: ModelShape, quant: Quant): void {
  const check = (ok: boolean, what: string): void => {
    if (!ok) throw new Error(`model shape: ${what}`);
  };
  check(s.embeddingLength % s.headCount === 0, `embeddingLength ${s.embeddingLength} not divisible by headCount ${s.headCount}`);
  check(s.headCount % s.headCountKv === 0, `headCount ${s.headCount} not divisible by headCountKv ${s.headCountKv}`);
  if (quant === 'q8_0') {
    check(s.embeddingLength % 32 === 0, `Q8_0 needs embeddingLength % 32 == 0, got ${s.embeddingLength}`);
    check(s.feedForwardLength % 32 === 0, `Q8_0 needs feedForwardLength % 32 == 0, got ${s.feedForwardLength}`);
  }
}

/**
 * The name a generated model carries (general.name): `headroom-<preset>`, with `-<quant>` unless
 * F16. `model make --preset tiny` therefore writes the default model's exact bytes (same name,
 * quant and seed 0), so admission artifacts fitted on one load on the other.
 */
export function modelName(preset: string, quant: Quant): string {
  return quant === 'f16' ? `headroom-${preset}` : `headroom-${preset}-${quant}`;
}

export function makeModel(opts: MakeModelOptions): MadeModel {
  const { quant, seed } = opts;
  if (!Number.isInteger(seed) || seed < 0) throw new Error(`seed: expected a non-negative integer, got ${seed}`);
  const foreign = opts.vocabFrom === undefined ? null : foreignTokenizer(opts.vocabFrom);
  const s: ModelShape = foreign === null ? opts.shape : { ...opts.shape, vocabSize: foreign.vocabSize };
  validateShape(s, quant);
  if (foreign !== null && opts.eosTokenId !== undefined) throw new Error('eosTokenId: not with vocabFrom (the vocabulary names its own)');
  const vocab = foreign === null ? buildSpmVocab(s.vocabSize) : null;
  const eosId = opts.eosTokenId ?? vocab?.eosId ?? 0;
  if (eosId < 0 || eosId >= s.vocabSize) throw new Error(`eosTokenId: expected 0..${s.vocabSize - 1}, got ${eosId}`);
  const headDim = s.embeddingLength / s.headCount;
  const wType = quant === 'f16' ? GgmlType.F16 : GgmlType.Q8_0;
  const std = opts.weightStd ?? 0.02;

  const md = new Map<string, KvValue>();
  md.set('general.architecture', { type: 'string', value: 'llama' });
  md.set('general.name', { type: 'string', value: opts.name ?? 'headroom-random' });
  md.set('general.file_type', { type: 'u32', value: quant === 'f16' ? 1 : 7 });
  md.set('general.alignment', { type: 'u32', value: 32 });
  md.set('llama.context_length', { type: 'u32', value: s.contextLength });
  md.set('llama.embedding_length', { type: 'u32', value: s.embeddingLength });
  md.set('llama.block_count', { type: 'u32', value: s.blockCount });
  md.set('llama.feed_forward_length', { type: 'u32', value: s.feedForwardLength });
  md.set('llama.attention.head_count', { type: 'u32', value: s.headCount });
  md.set('llama.attention.head_count_kv', { type: 'u32', value: s.headCountKv });
  md.set('llama.attention.layer_norm_rms_epsilon', { type: 'f32', value: s.rmsEps });
  md.set('llama.rope.dimension_count', { type: 'u32', value: headDim });
  md.set('llama.rope.freq_base', { type: 'f32', value: s.ropeFreqBase });
  md.set('llama.vocab_size', { type: 'u32', value: s.vocabSize });
  if (foreign !== null) {
    for (const [key, kv] of foreign.keys) md.set(key, kv);
  } else if (vocab !== null) {
    md.set('tokenizer.ggml.model', { type: 'string', value: 'llama' });
    md.set('tokenizer.ggml.tokens', { type: 'string[]', value: vocab.tokens });
    md.set('tokenizer.ggml.scores', { type: 'f32[]', value: vocab.scores });
    md.set('tokenizer.ggml.token_type', { type: 'i32[]', value: vocab.types });
    md.set('tokenizer.ggml.bos_token_id', { type: 'u32', value: vocab.bosId });
    md.set('tokenizer.ggml.eos_token_id', { type: 'u32', value: eosId });
    md.set('tokenizer.ggml.unknown_token_id', { type: 'u32', value: vocab.unkId });
    md.set('tokenizer.ggml.add_bos_token', { type: 'bool', value: true });
    md.set('tokenizer.ggml.add_eos_token', { type: 'bool', value: false });
  }
  if (opts.chatTemplate !== undefined) md.set('tokenizer.chat_template', { type: 'string', value: opts.chatTemplate });

  const d = s.embeddingLength;
  const kvDim = headDim * s.headCountKv;
  const tensors: TensorSpec[] = [];
  const weight = (name: string, dims: [number, number]): void => {
    tensors.push({ name, dims, type: wType, produce: randomTensor(wType, dims[0] * dims[1], std, streamSeed(seed, name)) });
  };
  const norm = (name: string): void => {
    tensors.push({ name, dims: [d], type: GgmlType.F32, produce: constantF32(d, 1) });
  };
  weight('token_embd.weight', [d, s.vocabSize]);
  norm('output_norm.weight');
  for (let i = 0; i < s.blockCount; i++) {
    const p = `blk.${i}.`;
    norm(`${p}attn_norm.weight`);
    weight(`${p}attn_q.weight`, [d, d]);
    weight(`${p}attn_k.weight`, [d, kvDim]);
    weight(`${p}attn_v.weight`, [d, kvDim]);
    weight(`${p}attn_output.weight`, [d, d]);
    norm(`${p}ffn_norm.weight`);
    weight(`${p}ffn_gate.weight`, [d, s.feedForwardLength]);
    weight(`${p}ffn_up.weight`, [d, s.feedForwardLength]);
    weight(`${p}ffn_down.weight`, [s.feedForwardLength, d]);
  }
  const bytes = writeGguf(opts.out, md, tensors);
  return { path: opts.out, bytes, numParams: countParams(s) };
}
