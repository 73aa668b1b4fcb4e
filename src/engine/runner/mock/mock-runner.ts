// The mock runner: the Runner interface with an explicit, deterministic cost model and no model.
//
//   step time = speed × (stepOverheadMs + prefillTokenMs × fed prompt tokens + decodeSeqMs × decoding sequences
//                        + attendMsPerRowKcell × rows × cells in use / 1000)
//
// The last term is llama.cpp's unified pool: every row attends over the cells in use, whoever's
// they are (0 by default). `realTime: false` reports the step time without waiting for it.
//
// Tokens are a pure function of a rolling hash of the sequence's whole KV history (and, when
// sampling, the request's seed), so a request produces the same text alone, inside any batch, or
// after a prefix-cache hit — and a KV operation that gives a sequence the wrong cells (a seqCopy
// from the wrong owner, a stale range) changes its text. The "each stream carries only its own
// tokens" and cache on/off equivalence tests rely on that. It keeps a simulated
// unified KV pool (MockKv) and refuses a step that does not fit, as llama.cpp does.
//
// Of the sampling settings it honours, deterministically: temperature 0 vs > 0 and the seed, a
// logit bias of at least +50 (forces the token; the largest wins, then the smaller id) or at most
// -50 (bans it), and log-probabilities, from a fake distribution that halves down the ranks (the
// sampled token first at 1/2, then alternatives at 1/4, 1/8, ...; the rest of the mass elsewhere).
// A bias between those, when sampling, acts as on a model whose logits are flat over the whole
// vocabulary of V tokens (a random-weights model nearly is): token t is drawn with probability
// e^(b/T) / (Σ e^(b_j/T) + V − k) over the k biased tokens, else the unbiased token. A bias on EOS
// so makes the output length geometric, seeded, and invisible to anything that reads the request
// but the sampler: the natural-length workloads (src/harness/natural-length.ts) rely on that.
// It ignores top-k, top-p, min-p and the penalties; grammars never reach it (the API refuses
// response_format without a grammar sampler).

import type { Runner, RunnerInfo } from '../runner.ts';
import type { LogitBias, RunnerPlan, SamplingParams, StepResult, TokenLogprob } from '../../plan.ts';
import { MockKv } from './mock-kv.ts';
import { BOS_ID, EMOJI_BYTE_TOKENS, EOS_ID, MOCK_GENERATION_POOL, MOCK_VOCAB_SIZE, MockTokenizer } from './mock-tokenizer.ts';
import { bug } from '../../../util/bug.ts';

export interface MockCostModel {
  /** Fixed cost of every forward pass, ms. */
  readonly stepOverheadMs: number;
  /** Cost per prompt token fed (prefill), ms. */
  readonly prefillTokenMs: number;
  /** Cost per sequence decoding one token, ms. */
  readonly decodeSeqMs: number;
  /** Cost per row per 1,000 cells in use in the pool, ms (attention over the unified pool). */
  readonly attendMsPerRowKcell: number;
  /** Multiplies every cost: 0 runs as fast as the event loop allows, 2 is half speed. */
  readonly speed: number;
}

export interface MockRunnerOptions {
  readonly modelId?: string;
  readonly contextTokens?: number;
  readonly maxSequences?: number;
  readonly maxBatchTokens?: number;
  readonly cost?: Partial<MockCostModel>;
  /** Wait for each step's simulated time (default true); false: report it, return at once. */
  readonly realTime?: boolean;
  /** Probability that a sampled (non-greedy or greedy) token is EOS; decided by a hash, so seeded. */
  readonly eosProbability?: number;
}

export const DEFAULT_MOCK_COST: MockCostModel = { stepOverheadMs: 2, prefillTokenMs: 0.05, decodeSeqMs: 0.5, attendMsPerRowKcell: 0, speed: 1 };

/** 32-bit FNV-1a over a few integers: cheap, stable, good enough to spread tokens. */
function hash(...values: number[]): number {
  let h = 0x811c9dc5;
  for (const v of values) {
    h ^= v & 0xffff;
    h = Math.imul(h, 0x01000193);
    h ^= v >>> 16;
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** The mock's fake distribution: the sampled token at 1/2, then `k` − 1 other pool tokens at 1/4, 1/8, ... (a hash of the history picks them). */
function fakeLogprob(token: number, hist: readonly number[], k: number): TokenLogprob {
  const top: { tokenId: number; logprob: number }[] = [];
  const pool = MOCK_GENERATION_POOL;
  let at = hash(hist.at(-1) ?? 0, 0x10b) % pool.length;
  for (let rank = 0; top.length < k; rank++) {
    const id = rank === 0 ? token : pool[at++ % pool.length]!;
    if (rank > 0 && (id === token || top.some((t) => t.tokenId === id))) continue;
    top.push({ tokenId: id, logprob: -(top.length + 1) * Math.LN2 });
  }
  return { logprob: -Math.LN2, top };
}

export class MockRunner implements Runner {
  readonly info: RunnerInfo;
  readonly tokenizer = new MockTokenizer();
  readonly #cost: MockCostModel;
  readonly #realTime: boolean;
  readonly #eosProbability: number;
  readonly #kv: MockKv;
  /** Per sequence, the rolling hash of its history after each position (what its KV cells "contain"). */
  readonly #history = new Map<number, number[]>();
  /** The host tier: a saved sequence's history (its cells' "contents"), by key. */
  readonly #host = new Map<number, number[]>();
  #closed = false;

  constructor(opts: MockRunnerOptions = {}) {
    const cost = { ...DEFAULT_MOCK_COST, ...opts.cost };
    for (const [k, v] of Object.entries(cost)) {
      if (!Number.isFinite(v) || v < 0) throw new Error(`MockRunner: expected cost.${k} ≥ 0, got ${v}`);
    }
    const eos = opts.eosProbability ?? 0;
    if (!(eos >= 0 && eos <= 1)) throw new Error(`MockRunner: expected eosProbability in [0, 1], got ${eos}`);
    this.#cost = cost;
    this.#realTime = opts.realTime ?? true;
    this.#eosProbability = eos;
    const contextTokens = opts.contextTokens ?? 8192;
    this.#kv = new MockKv(contextTokens);
    this.info = {
      name: 'mock',
      modelId: opts.modelId ?? 'headroom-mock',
      contextTokens,
      maxSequences: opts.maxSequences ?? 64,
      vocabSize: MOCK_VOCAB_SIZE,
      maxBatchTokens: opts.maxBatchTokens ?? 512,
      details: { cost, eosProbability: eos, vocabSize: MOCK_VOCAB_SIZE },
    };
  }

  get numUsedCells(): number {
    return this.#kv.numUsedCells;
  }

  async execute(plan: RunnerPlan): Promise<StepResult> {
    if (this.#closed) return { ok: false, reason: 'backend_error', message: 'runner is closed' };
    const numTokens = plan.items.reduce((n, it) => n + it.tokens.length, 0);
    if (numTokens > this.info.maxBatchTokens) bug(`a plan of ${numTokens} tokens exceeds the batch limit ${this.info.maxBatchTokens}`);
    for (const op of plan.kvOps) {
      if (op.kind === 'save') {
        const hist = this.#history.get(op.seqId) ?? [];
        if (hist.length !== this.#kv.length(op.seqId)) bug(`save of seq ${op.seqId}: ${hist.length} history entries for ${this.#kv.length(op.seqId)} cells`);
        this.#host.set(op.key, [...hist]);
        continue;
      }
      if (op.kind === 'load') {
        const hist = this.#host.get(op.key);
        if (hist === undefined) bug(`load of host entry ${op.key}, which was never saved or was dropped`);
        // As llama.cpp: the restored cells go wherever cells are free; the scheduler made room for them.
        if (!this.#kv.append(op.seqId, 0, hist.length)) bug(`load of host entry ${op.key}: ${hist.length} cells do not fit`);
        this.#history.set(op.seqId, [...hist]);
        continue;
      }
      if (op.kind === 'drop') {
        this.#host.delete(op.key);
        continue;
      }
      if (op.kind === 'adopt') {
        // The cells taken must hold what the destination's did: the same tokens' KV history.
        const src = this.#history.get(op.srcSeqId) ?? [];
        const dst = this.#history.get(op.dstSeqId) ?? [];
        for (let p = op.p0; p < op.p1; p++) if (src[p] !== dst[p]) bug(`adopt ${op.srcSeqId}->${op.dstSeqId} [${op.p0},${op.p1}): position ${p} holds different KV`);
        this.#kv.apply(op);
        continue;
      }
      this.#kv.apply(op);
      if (op.kind === 'remove') this.#history.get(op.seqId)?.splice(op.p0, op.p1 < 0 ? Infinity : op.p1 - op.p0);
      else this.#history.set(op.dstSeqId, [...(this.#history.get(op.dstSeqId) ?? []), ...(this.#history.get(op.srcSeqId) ?? []).slice(op.p0, op.p1 < 0 ? undefined : op.p1)]);
    }
    // llama.cpp places the whole batch or nothing; so does the mock.
    if (numTokens > this.#kv.numCells - this.#kv.numUsedCells) {
      return { ok: false, reason: 'no_kv_slot', message: `no KV slot for a batch of ${numTokens} tokens` };
    }
    let prefillTokens = 0;
    let decodeSeqs = 0;
    const sampled: (number | null)[] = [];
    const logprobs: (TokenLogprob | null)[] = [];
    for (const item of plan.items) {
      if (!this.#kv.append(item.seqId, item.startPos, item.tokens.length)) bug('MockKv refused after the capacity check');
      const hist = this.#history.get(item.seqId) ?? [];
      for (const t of item.tokens) hist.push(hash(hist.at(-1) ?? 0x9e37, t));
      this.#history.set(item.seqId, hist);
      if (item.tokens.length === 1 && item.startPos > 0 && item.sample && !item.resetSampler) decodeSeqs++;
      else prefillTokens += item.tokens.length;
      const token = item.sample ? this.#next(hist, item.tokens.at(-1)!, item.sampling) : null;
      sampled.push(token);
      logprobs.push(token !== null && item.sampling.logprobs !== undefined ? fakeLogprob(token, hist, item.sampling.logprobs) : null);
    }
    const c = this.#cost;
    const attendMs = (c.attendMsPerRowKcell * numTokens * this.#kv.numUsedCells) / 1000;
    const computeMs = c.speed * (c.stepOverheadMs + c.prefillTokenMs * prefillTokens + c.decodeSeqMs * decodeSeqs + attendMs);
    if (computeMs > 0 && this.#realTime) await new Promise((r) => setTimeout(r, computeMs));
    else await new Promise((r) => setImmediate(r));
    return { ok: true, sampled, ...(logprobs.some((l) => l !== null) ? { logprobs } : {}), computeMs };
  }

  async close(): Promise<void> {
    this.#closed = true;
    return Promise.resolve();
  }

  /** The next token: a hash of the whole history and its length (greedy), plus the seed when sampling. */
  #next(hist: readonly number[], last: number, sampling: SamplingParams): number {
    const token = this.#unbiased(hist, last, sampling);
    const bias = sampling.logitBias;
    if (bias === undefined || bias.length === 0) return token;
    const drawn = sampling.temperature > 0 ? this.#flatDraw(hist, sampling, bias) : null;
    if (drawn !== null) return drawn;
    let forced: LogitBias | null = null;
    for (const b of bias) if (b.bias >= 50 && (forced === null || b.bias > forced.bias || (b.bias === forced.bias && b.tokenId < forced.tokenId))) forced = b;
    if (forced !== null) return forced.tokenId;
    const banned = new Set(bias.filter((b) => b.bias <= -50).map((b) => b.tokenId));
    if (!banned.has(token)) return token;
    const pool = MOCK_GENERATION_POOL;
    const at = pool.indexOf(token);
    for (let i = 1; i <= pool.length; i++) {
      const t = pool[(Math.max(at, 0) + i) % pool.length]!;
      if (!banned.has(t)) return t;
    }
    return EOS_ID; // every generation token banned
  }

  /**
   * Moderate biases (−50, +50) under a flat-logits model: the biased token drawn with its softmax
   * share, from a uniform the history and seed decide (independent of the unbiased token's hash);
   * null when none is drawn. Forcing and banning biases are left to #next.
   */
  #flatDraw(hist: readonly number[], sampling: SamplingParams, bias: readonly LogitBias[]): number | null {
    const moderate = bias.filter((b) => b.bias > -50 && b.bias < 50 && b.bias !== 0);
    if (moderate.length === 0) return null;
    const weights = moderate.map((b) => Math.exp(b.bias / sampling.temperature));
    const total = weights.reduce((s, w) => s + w, 0) + (MOCK_VOCAB_SIZE - moderate.length);
    const n = hist.length;
    let u = (hash(hist[n - 1] ?? BOS_ID, n, sampling.seed, 0xb1a5) / 2 ** 32) * total;
    for (const [i, b] of moderate.entries()) {
      u -= weights[i]!;
      if (u < 0) return b.tokenId;
    }
    return null;
  }

  #unbiased(hist: readonly number[], last: number, sampling: SamplingParams): number {
    const n = hist.length;
    const context = [hist[n - 1] ?? BOS_ID, n];
    const h = sampling.temperature > 0 ? hash(...context, sampling.seed, 0x5eed) : hash(...context);
    if (this.#eosProbability > 0 && (h % 10_000) / 10_000 < this.#eosProbability) return EOS_ID;
    // Mid-emoji: finish the character's bytes in order, so byte tokens arrive split across steps.
    const emojiAt = EMOJI_BYTE_TOKENS.indexOf(last);
    if (emojiAt >= 0 && emojiAt < EMOJI_BYTE_TOKENS.length - 1) return EMOJI_BYTE_TOKENS[emojiAt + 1]!;
    if (h % 17 === 0) return EMOJI_BYTE_TOKENS[0]!;
    return MOCK_GENERATION_POOL[(h >>> 8) % MOCK_GENERATION_POOL.length]!;
  }
}
