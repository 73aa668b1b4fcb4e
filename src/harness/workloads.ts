// Workloads: what each request asks for. A workload is a pure function of (config, seed, index),
// drawn from its own RNG stream so the arrival realisation does not depend on it.
//
//   chat     shared-prefix chat: 70% of requests carry one of 4 system prompts of 480–650 tokens,
//            30% a unique one of the same length range; user turn ~45 tokens; requested output
//            lognormal(μ 4.6, σ 0.8) clipped to [16, 512].
//   mixed    short/medium/long inputs of 512/2,048/8,192 tokens (the flow-control study's sizes),
//            scaled down when the model's context is smaller; fixed 128-token outputs. The study
//            publishes the sizes but not their mix, so the default mix is 1:1:1 (`--mix`).
//   uniform  every request the same size (`--prompt-tokens`, `--output-tokens`), each prompt unique.
//   long     long prompts (issue 11's per-token comparison): half the requests carry one of 2 shared
//            documents of 1,000–1,500 tokens followed by a question of 100–900 tokens, half a unique
//            document of 800–2,800 tokens; requested output lognormal(μ 4.0, σ 0.9) clipped to [8, 256].
//
// Natural-length workloads (natural-length.ts): the same prompts as their base workload for the
// same seed, but no fixed length. Each request samples at temperature 1 with one logit bias on the
// model's EOS token, the same for every request, sized for a mean output length; max_tokens is only
// a cap. The length is geometric and decided inside the sampler by a per-request seed, so nothing
// admission reads at arrival says how long this request will run.
//
//   chat-natural           chat prompts; mean 133 tokens (chat's mean requested output), cap 512.
//   chat-natural-uncapped  the same, no max_tokens sent (the server's own limit is the cap).
//   long-natural           long prompts; mean 76 tokens (long's mean requested output), cap 256.
import { Rng } from '../util/rng.ts';
import { promptText, wordsForTokens } from './prompt-text.ts';
import type { EosTarget, NaturalSampling } from './natural-length.ts';
import { eosBias } from './natural-length.ts';
import { bug } from '../util/bug.ts';

/** Natural-length workloads: the base workload whose prompts they reuse, the mean length, the cap (null: none sent). */
export const NATURAL_WORKLOADS = {
  'chat-natural': { base: 'chat', meanTokens: 133, capTokens: 512 },
  'chat-natural-uncapped': { base: 'chat', meanTokens: 133, capTokens: null },
  'long-natural': { base: 'long', meanTokens: 76, capTokens: 256 },
} as const satisfies Record<string, { base: 'chat' | 'long'; meanTokens: number; capTokens: number | null }>;

export type NaturalWorkloadKind = keyof typeof NATURAL_WORKLOADS;
export const WORKLOAD_KINDS = ['chat', 'mixed', 'uniform', 'long', ...(Object.keys(NATURAL_WORKLOADS) as NaturalWorkloadKind[])] as const;
export type WorkloadKind = 'chat' | 'mixed' | 'uniform' | 'long' | NaturalWorkloadKind;

export function isNaturalWorkload(kind: WorkloadKind): kind is NaturalWorkloadKind {
  return Object.hasOwn(NATURAL_WORKLOADS, kind);
}

export interface WorkloadOptions {
  readonly kind: WorkloadKind;
  readonly seed: number;
  /** Tokens per generated word on the target's tokenizer (1 for mainstream BPE; see prompt-text.ts). */
  readonly tokensPerWord: number;
  /** Model context in tokens; mixed-size inputs are scaled to fit. 0 = no scaling. */
  readonly contextTokens: number;
  /** Relative weights of short:medium:long for `mixed`. */
  readonly mix: readonly [number, number, number];
  /** Prompt and output size for `uniform`; output size for `mixed`. */
  readonly promptTokens: number;
  readonly outputTokens: number;
  /** Natural-length workloads: the target's EOS token and vocabulary (required there, unused elsewhere). */
  readonly eos?: EosTarget;
  /** Natural-length workloads: mean output length to size the EOS bias for (default: the workload's). */
  readonly naturalMeanTokens?: number;
}

export interface RequestSpec {
  /** Workload class: chat 'shared' | 'unique'; mixed 'short' | 'medium' | 'long'; 'uniform'. */
  readonly klass: string;
  /** Which shared system prompt (0..3) this request carries; null when unique. */
  readonly prefixId: number | null;
  /** Chat messages in OpenAI form. */
  readonly messages: ReadonlyArray<{ readonly role: 'system' | 'user'; readonly content: string }>;
  /** The harness's own estimate of the prompt's tokens (see prompt-text.ts). */
  readonly promptTokensEst: number;
  /** max_tokens sent: with ignore_eos, the output length; with `sampling`, only a cap (null: not sent). */
  readonly maxTokens: number | null;
  /** Natural-length requests: temperature, EOS bias and seed, sent instead of ignore_eos. */
  readonly sampling?: NaturalSampling;
}

export const CHAT_NUM_PREFIXES = 4;
export const CHAT_SHARED_FRACTION = 0.7;
const CHAT_SYSTEM_MIN = 480;
const CHAT_SYSTEM_MAX = 650;
const CHAT_USER_TOKENS = 45;
const MIXED_SIZES = [512, 2048, 8192] as const;
export const LONG_NUM_DOCS = 2;
export const LONG_SHARED_FRACTION = 0.5;
const LONG_DOC_MIN = 1000;
const LONG_DOC_MAX = 1500;
const LONG_QUESTION_MIN = 100;
const LONG_QUESTION_MAX = 900;
const LONG_UNIQUE_MIN = 800;
const LONG_UNIQUE_MAX = 2800;
const MIXED_CLASSES = ['short', 'medium', 'long'] as const;

/** Draws request specs in order; request i's spec depends only on (options, i-th draw). */
export class Workload {
  readonly #opts: WorkloadOptions;
  readonly #rng: Rng;
  readonly #sharedPrompts: string[] = [];
  readonly #sharedTokens: number[] = [];
  readonly #longDocs: string[] = [];
  readonly #longDocTokens: number[] = [];
  /** Per-request sampling seeds, a stream of their own so the prompts match the base workload's. */
  readonly #seedRng: Rng;
  /** The EOS bias of a natural-length workload; null for the others. */
  readonly #eosBias: number | null = null;

  constructor(opts: WorkloadOptions) {
    if (!(opts.tokensPerWord > 0)) throw new Error(`workload: expected tokensPerWord > 0, got ${opts.tokensPerWord}`);
    if (opts.mix.some((w) => !(w >= 0)) || opts.mix.every((w) => w === 0)) {
      throw new Error(`workload: expected non-negative mix weights, not all zero, got ${opts.mix.join(':')}`);
    }
    this.#opts = opts;
    this.#rng = new Rng(opts.seed, 'workload');
    this.#seedRng = new Rng(opts.seed, 'sampling-seeds');
    if (isNaturalWorkload(opts.kind)) {
      if (opts.eos === undefined) throw new Error(`workload: ${opts.kind} needs the target's EOS token and vocabulary size, got none`);
      this.#eosBias = eosBias(opts.naturalMeanTokens ?? NATURAL_WORKLOADS[opts.kind].meanTokens, opts.eos.vocabSize);
    }
    const prefixRng = new Rng(opts.seed, 'shared-prefixes');
    for (let i = 0; i < CHAT_NUM_PREFIXES; i++) {
      const tokens = CHAT_SYSTEM_MIN + prefixRng.int(CHAT_SYSTEM_MAX - CHAT_SYSTEM_MIN + 1);
      this.#sharedTokens.push(tokens);
      this.#sharedPrompts.push(`System prompt ${i}. ` + promptText(prefixRng, wordsForTokens(tokens, opts.tokensPerWord)));
    }
    // Its own stream, so adding the long workload left the chat prompts above unchanged.
    const docRng = new Rng(opts.seed, 'long-documents');
    for (let i = 0; i < LONG_NUM_DOCS; i++) {
      const tokens = LONG_DOC_MIN + docRng.int(LONG_DOC_MAX - LONG_DOC_MIN + 1);
      this.#longDocTokens.push(tokens);
      this.#longDocs.push(`Document ${i}. ` + promptText(docRng, wordsForTokens(tokens, opts.tokensPerWord)));
    }
  }

  /** Scale applied to mixed-size inputs so the long class plus its output fits the context. */
  mixedScale(): number {
    const ctx = this.#opts.contextTokens;
    if (ctx <= 0) return 1;
    const longest = (MIXED_SIZES[2] + this.#opts.outputTokens) * 1.05;
    return Math.min(1, ctx / longest);
  }

  next(): RequestSpec {
    switch (this.#opts.kind) {
      case 'chat':
        return this.#chat();
      case 'mixed':
        return this.#mixed();
      case 'uniform':
        return this.#single('uniform', this.#opts.promptTokens, this.#opts.outputTokens);
      case 'long':
        return this.#long();
      case 'chat-natural':
      case 'chat-natural-uncapped':
      case 'long-natural':
        return this.#natural(this.#opts.kind);
    }
  }

  /** The base workload's request (so the same prompts for the same seed) with a hidden length. */
  #natural(kind: NaturalWorkloadKind): RequestSpec {
    const w = NATURAL_WORKLOADS[kind];
    const base = w.base === 'chat' ? this.#chat() : this.#long();
    const eos = this.#opts.eos;
    if (eos === undefined || this.#eosBias === null) bug('a natural-length workload without its EOS bias (the constructor checks for one)');
    return {
      ...base,
      maxTokens: w.capTokens,
      sampling: { temperature: 1, logitBias: { [eos.eosTokenId]: this.#eosBias }, seed: this.#seedRng.int(2 ** 31) },
    };
  }

  #chat(): RequestSpec {
    const rng = this.#rng;
    const shared = rng.uniform() < CHAT_SHARED_FRACTION;
    const prefixId = shared ? rng.int(CHAT_NUM_PREFIXES) : null;
    const maxTokens = Math.round(Math.min(512, Math.max(16, rng.lognormal(4.6, 0.8))));
    let system: string;
    let systemTokens: number;
    if (prefixId !== null) {
      system = this.#sharedPrompts[prefixId] ?? '';
      systemTokens = this.#sharedTokens[prefixId] ?? 0;
    } else {
      systemTokens = CHAT_SYSTEM_MIN + rng.int(CHAT_SYSTEM_MAX - CHAT_SYSTEM_MIN + 1);
      system = promptText(rng, wordsForTokens(systemTokens, this.#opts.tokensPerWord));
    }
    const user = promptText(rng, wordsForTokens(CHAT_USER_TOKENS, this.#opts.tokensPerWord));
    return {
      klass: shared ? 'shared' : 'unique',
      prefixId,
      messages: [
        { role: 'system', content: system },
        { role: 'user', content: user },
      ],
      promptTokensEst: systemTokens + CHAT_USER_TOKENS,
      maxTokens,
    };
  }

  #long(): RequestSpec {
    const rng = this.#rng;
    const shared = rng.uniform() < LONG_SHARED_FRACTION;
    const docId = shared ? rng.int(LONG_NUM_DOCS) : null;
    const maxTokens = Math.round(Math.min(256, Math.max(8, rng.lognormal(4.0, 0.9))));
    const tpw = this.#opts.tokensPerWord;
    if (docId === null) {
      const tokens = LONG_UNIQUE_MIN + rng.int(LONG_UNIQUE_MAX - LONG_UNIQUE_MIN + 1);
      const text = promptText(rng, wordsForTokens(tokens, tpw));
      return { klass: 'unique', prefixId: null, messages: [{ role: 'user', content: text }], promptTokensEst: tokens, maxTokens };
    }
    const question = LONG_QUESTION_MIN + rng.int(LONG_QUESTION_MAX - LONG_QUESTION_MIN + 1);
    return {
      klass: 'shared',
      prefixId: docId,
      messages: [
        { role: 'system', content: this.#longDocs[docId] ?? '' },
        { role: 'user', content: promptText(rng, wordsForTokens(question, tpw)) },
      ],
      promptTokensEst: (this.#longDocTokens[docId] ?? 0) + question,
      maxTokens,
    };
  }

  #mixed(): RequestSpec {
    const [ws, wm, wl] = this.#opts.mix;
    const u = this.#rng.uniform() * (ws + wm + wl);
    const idx = u < ws ? 0 : u < ws + wm ? 1 : 2;
    const tokens = Math.max(1, Math.round(MIXED_SIZES[idx] * this.mixedScale()));
    return this.#single(MIXED_CLASSES[idx], tokens, this.#opts.outputTokens);
  }

  #single(klass: string, promptTokens: number, outputTokens: number): RequestSpec {
    const text = promptText(this.#rng, wordsForTokens(promptTokens, this.#opts.tokensPerWord));
    return {
      klass,
      prefixId: null,
      messages: [{ role: 'user', content: text }],
      promptTokensEst: promptTokens,
      maxTokens: outputTokens,
    };
  }
}
