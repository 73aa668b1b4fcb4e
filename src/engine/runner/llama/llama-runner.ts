// The llama runner: executes scheduler plans on llama.cpp through the native addon.
//
// Invariants:
// - One step at a time: execute() refuses to overlap (the engine awaits each step; overlap is a bug).
// - KV ops run before the forward pass, in plan order; each plan item's tokens become consecutive
//   batch rows, and only an item's last row may ask for a sample. Rows are laid out by
//   step-layout.ts (single rows first when a step is cut in two); results map back to plan order.
// - A batch llama.cpp refuses (no KV slot) resolves as { ok: false, reason: 'no_kv_slot' } and
//   leaves the KV state as it was (llama_decode restores it); it never throws.
// - Threads are always explicit (default 2): llama.cpp's own default oversubscribes small machines.
// - Prompts are templated and tokenized on libuv's pool by its tokenizer (llama-tokenizer.ts);
//   close() waits for those in flight.
import { basename } from 'node:path';
import type { Runner, RunnerInfo } from '../runner.ts';
import type { KvOp, RunnerPlan, StepItem, StepResult, TokenLogprob } from '../../plan.ts';
import { loadLlamaAddon, llamaBinsDir } from './addon.ts';
import type { AddonContext, AddonContextOptions, AddonDecodeResult, AddonHostBytesStats, AddonSamplerConfig, LlamaAddon } from './addon.ts';
import { LlamaTokenizer } from './llama-tokenizer.ts';
import { splitLayout } from './step-layout.ts';
import { bug } from '../../../util/bug.ts';

export interface LlamaRunnerOptions {
  /** Path of a GGUF model. */
  readonly modelPath: string;
  /** Name served under /v1/models (default: the file name without .gguf). */
  readonly modelId?: string;
  /** KV cells in the unified pool (default: the model's trained context, at most 8192). */
  readonly contextTokens?: number;
  /** Allow contextTokens above the model's trained context (GGUF <architecture>.context_length); default false: refused. */
  readonly contextBeyondTrained?: boolean;
  /** Sequence ids 0..maxSequences-1 (default 32, at most 256). */
  readonly maxSequences?: number;
  /** Largest forward pass in tokens: llama.cpp's n_batch (default 512). */
  readonly maxBatchTokens?: number;
  /** Physical micro-batch (n_ubatch, default = maxBatchTokens). */
  readonly microBatchTokens?: number;
  /** llama.cpp threads for decode and prefill (default 2). */
  readonly threads?: number;
  /** One persistent ggml thread pool for every decode (default true; see native/src/context.h). */
  readonly threadPool?: boolean;
  /** The pool's polling level between steps, 0–100 (default: ggml's 50). */
  readonly threadPoll?: number;
  /**
   * Bind the pool's threads to CPUs of their own, and each decode's calling thread to another for
   * the decode (default false). On a 2-core host the kernel otherwise sometimes stacked both spinning
   * threads on one CPU with the other idle (docs/per-token.md §14). Needs threads ≤ CPUs allowed;
   * two pinned servers on one host would share the same CPUs.
   */
  readonly pinThreads?: boolean;
  /**
   * Run a step on the JS thread, blocking it, when the last steps with as many rows took at most
   * this long (ms; default 0: never, every step on a libuv pool thread). Saves the two thread
   * hand-offs around a step (~0.1–0.2 ms on a busy 2-core host) for short decode steps; the event
   * loop waits for such a step instead of serving sockets meanwhile. Steps of more rows than
   * sequences always run off the JS thread.
   */
  readonly inlineStepMs?: number;
  /**
   * Run a step that mixes decoding rows with a prompt chunk (64 rows or more in all) as two
   * llama_decode calls, the single rows and then the chunks (default true): batched together, each
   * decoder's context is walked by the chunk's first 64 rows in llama.cpp's CPU flash attention
   * (step-layout.ts). False: every step is one call.
   */
  readonly splitSteps?: boolean;
  /** A Jinja chat template (its text) to use instead of the GGUF's `tokenizer.chat_template`. */
  readonly chatTemplate?: string;
  /** Tokenize control-token text inside chat messages as control tokens, as llama-server and vLLM do (default false: as text). */
  readonly parseSpecialInMessages?: boolean;
  /** Tokenize /v1/completions prompts with control-token text as text (default false: parsed, as llama-server and vLLM do). */
  readonly promptSpecialAsText?: boolean;
  /** Addon path (default native/build/Release/headroom_llama.node); tests point it elsewhere. */
  readonly addonPath?: string;
  /** Pass all llama.cpp logs through (default: warnings and errors only, or all with HEADROOM_LLAMA_LOG=1 in the environment). */
  readonly verbose?: boolean;
}

/** Timing of the last step, for calibration (µs on the C++ side, ms on the JS side). */
export interface StepTiming {
  readonly rows: number;
  /** llama_decode alone (C++). */
  readonly decodeUs: number;
  /** Native sampling of the flagged rows (C++). */
  readonly sampleUs: number;
  /** The worker body: batch fill + decode + sampling (C++). */
  readonly workerUs: number;
  /** execute() from call to result, KV ops and row packing included (JS). */
  readonly executeMs: number;
  /** The thread hand-offs (C++): call to the worker body starting, its end to the result on the JS thread (both ≈ 0 inline). */
  readonly queueUs: number;
  readonly returnUs: number;
  /** The step ran on the JS thread (inlineStepMs). */
  readonly inline: boolean;
}

/** The context asked for is longer than the model was trained on (its positions past that are untrained). */
export class ContextBeyondTrainedError extends Error {
  readonly code = 'context_beyond_trained';
  constructor(
    readonly contextTokens: number,
    readonly trainedTokens: number,
    /** The GGUF key that holds it (`<architecture>.context_length`). */
    readonly trainedKey: string,
    options?: ErrorOptions,
  ) {
    super(`a context of ${contextTokens} tokens is longer than the model's trained context of ${trainedTokens} (GGUF ${trainedKey})`, options);
    this.name = 'ContextBeyondTrainedError';
  }
}

function openContext(addon: LlamaAddon, options: AddonContextOptions): AddonContext {
  try {
    return new addon.HeadroomLlama(options);
  } catch (err) {
    const e = err as { code?: unknown; trainedTokens?: unknown; trainedKey?: unknown };
    if (e.code === 'context_beyond_trained') throw new ContextBeyondTrainedError(options.nCtx, Number(e.trainedTokens), typeof e.trainedKey === 'string' ? e.trainedKey : 'llama.context_length', { cause: err });
    throw err;
  }
}

function positiveInt(name: string, value: number | undefined, dflt: number, max = Number.MAX_SAFE_INTEGER): number {
  const v = value ?? dflt;
  if (!Number.isInteger(v) || v < 1 || v > max) throw new Error(`${name}: expected an integer in 1..${max}, got ${v}`);
  return v;
}

/** The native sampler chain for a plan item that starts a fresh sampler. */
function samplerConfig(item: StepItem): AddonSamplerConfig {
  const s = item.sampling;
  const bias = s.logitBias ?? [];
  return {
    temperature: s.temperature,
    topP: s.topP,
    topK: s.topK ?? 0,
    minP: s.minP ?? 0,
    seed: s.seed >>> 0,
    repetitionPenalty: s.repetitionPenalty ?? 1,
    frequencyPenalty: s.frequencyPenalty ?? 0,
    presencePenalty: s.presencePenalty ?? 0,
    logitBiasIds: Int32Array.from(bias, (b) => b.tokenId),
    logitBiasValues: Float32Array.from(bias, (b) => b.bias),
    grammar: s.grammar ?? '',
    grammarLazy: s.grammarLazy !== undefined,
    triggerPatterns: s.grammarLazy?.patterns ?? [],
    triggerTokens: Int32Array.from(s.grammarLazy?.tokens ?? []),
    grammarPrefill: Int32Array.from(s.grammarPrefill ?? []),
    logprobs: s.logprobs ?? -1,
    history: Int32Array.from(item.samplerHistory?.tokens ?? []),
    numPromptTokens: item.samplerHistory?.numPromptTokens ?? 0,
  };
}

/** The addon's flattened per-row log-probabilities as one entry per plan item (null: no sample or not asked). */
function unpackLogprobs(items: readonly StepItem[], res: AddonDecodeResult): (TokenLogprob | null)[] {
  let row = 0;
  let at = 0;
  return items.map((item) => {
    if (!item.sample) return null;
    const chosen = res.chosenLogprob[row]!;
    const numTop = res.numTop[row]!;
    row++;
    const top = Array.from({ length: numTop }, (_, j) => ({ tokenId: res.topIds[at + j]!, logprob: res.topLogprobs[at + j]! }));
    at += numTop;
    return Number.isNaN(chosen) ? null : { logprob: chosen, top };
  });
}

export class LlamaRunner implements Runner {
  readonly info: RunnerInfo;
  readonly tokenizer: LlamaTokenizer;
  readonly #ctx: AddonContext;
  /** The prefix cache's host tier: sequences' cells saved to host memory, by key (`save`/`load`/`drop` KV ops). */
  readonly #host = new Map<number, Buffer>();
  #inflight: Promise<AddonDecodeResult> | null = null;
  #closed = false;
  #lastTiming: StepTiming | null = null;
  #numPauses = 0;
  /** Bytes of the largest sequence saved to host memory so far (0: the host tier is unused). */
  #largestSave = 0;
  readonly #inlineStepMs: number;
  readonly #splitSteps: boolean;
  /** Steps run as two llama_decode calls (step-layout.ts). */
  #numSplitSteps = 0;
  /** Per row count (index), a running average of the worker body's ms, or -1 before one ran. */
  readonly #stepMsByRows: Float64Array;

  constructor(opts: LlamaRunnerOptions) {
    const threads = positiveInt('threads', opts.threads, 2, 256);
    const maxBatchTokens = positiveInt('maxBatchTokens', opts.maxBatchTokens, 512);
    const microBatchTokens = positiveInt('microBatchTokens', opts.microBatchTokens, maxBatchTokens, maxBatchTokens);
    const maxSequences = positiveInt('maxSequences', opts.maxSequences, 32, 256);
    const contextTokens = opts.contextTokens === undefined ? 0 : positiveInt('contextTokens', opts.contextTokens, 0);
    const inlineStepMs = opts.inlineStepMs ?? 0;
    if (!(Number.isFinite(inlineStepMs) && inlineStepMs >= 0)) throw new Error(`inlineStepMs: expected a number ≥ 0, got ${inlineStepMs}`);
    this.#inlineStepMs = inlineStepMs;
    this.#splitSteps = opts.splitSteps ?? true;
    this.#stepMsByRows = new Float64Array(maxSequences + 1).fill(-1);
    const addon = loadLlamaAddon(opts.addonPath);
    this.#ctx = openContext(addon, {
      modelPath: opts.modelPath,
      binsDir: llamaBinsDir(),
      nCtx: contextTokens,
      nCtxMax: 8192,
      nSeqMax: maxSequences,
      nBatch: maxBatchTokens,
      nUbatch: microBatchTokens,
      threads,
      threadsBatch: threads,
      pinThreads: opts.pinThreads === true,
      verbose: opts.verbose ?? process.env['HEADROOM_LLAMA_LOG'] === '1',
      allowBeyondTrained: opts.contextBeyondTrained === true,
      threadPool: opts.threadPool ?? true,
      ...(opts.threadPoll === undefined ? {} : { threadPoll: opts.threadPoll }),
    });
    const ci = this.#ctx.info();
    try {
      this.tokenizer = new LlamaTokenizer(addon, this.#ctx, ci.nVocab, ci.maxTokenBytes === 0 ? Infinity : ci.maxTokenBytes, {
        ...(opts.chatTemplate === undefined ? {} : { chatTemplate: opts.chatTemplate }),
        parseSpecialInMessages: opts.parseSpecialInMessages === true,
        promptSpecialAsText: opts.promptSpecialAsText === true,
      });
    } catch (err) {
      this.#ctx.close();
      throw new Error(`${opts.chatTemplate === undefined ? "the GGUF's chat template" : 'the --chat-template'} cannot be used: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    }
    this.info = {
      name: 'llama',
      modelId: opts.modelId ?? basename(opts.modelPath).replace(/\.gguf$/i, ''),
      contextTokens: ci.nCtx,
      maxSequences: ci.nSeqMax,
      vocabSize: ci.nVocab,
      maxBatchTokens: ci.nBatch,
      decodeRowsApart: this.#splitSteps,
      details: {
        fastTokenizer: ci.fastTokenizer,
        modelPath: opts.modelPath,
        description: ci.description,
        numParams: ci.numParams,
        modelBytes: ci.modelBytes,
        trainedContextTokens: ci.nCtxTrain,
        microBatchTokens: ci.nUbatch,
        threads: ci.threads,
        threadPool: ci.threadPool,
        threadPoll: ci.threadPoll,
        pinnedThreads: ci.pinnedThreads,
        splitSteps: this.#splitSteps,
        chatTemplate: this.tokenizer.chatTemplateSource,
        chatTemplateCaps: this.tokenizer.chatInfo.caps,
        thinkingByDefault: this.tokenizer.chatInfo.supportsThinking,
        parseSpecialInMessages: this.tokenizer.parseSpecialInMessages,
        promptSpecialAsText: this.tokenizer.promptSpecialAsText,
        tokenizerPath: ci.tokenizerPath,
        specialSplit: ci.specialSplit,
        loadWarnings: ci.loadLog.split('\n').map((l) => l.trim()).filter((l) => l.length > 0),
      },
    };
  }

  /** Timing of the last successful or refused forward pass (null before the first). */
  get lastTiming(): StepTiming | null {
    return this.#lastTiming;
  }

  /** Apply one KV operation; null when done, else why llama.cpp refused it. */
  #applyKvOp(op: KvOp): string | null {
    if (op.kind === 'copy') {
      this.#ctx.seqCopy(op.srcSeqId, op.dstSeqId, op.p0, op.p1);
    } else if (op.kind === 'adopt') {
      if (!this.#ctx.seqRemove(op.dstSeqId, op.p0, op.p1)) return `llama_memory_seq_rm refused seq ${op.dstSeqId} [${op.p0}, ${op.p1})`;
      this.#ctx.seqCopy(op.srcSeqId, op.dstSeqId, op.p0, op.p1);
    } else if (op.kind === 'remove') {
      if (!this.#ctx.seqRemove(op.seqId, op.p0, op.p1)) return `llama_memory_seq_rm refused seq ${op.seqId} [${op.p0}, ${op.p1})`;
    } else if (op.kind === 'save') {
      const bytes = this.#ctx.seqStateGet(op.seqId);
      this.#host.set(op.key, bytes);
      if (bytes.length > this.#largestSave) this.#largestSave = bytes.length;
    } else if (op.kind === 'load') {
      const bytes = this.#host.get(op.key);
      if (bytes === undefined) bug(`load of host entry ${op.key}, which was never saved or was dropped`);
      // The scheduler made room for every saved cell: a refusal here is an accounting bug.
      if (!this.#ctx.seqStateSet(op.seqId, bytes)) bug(`llama_state_seq_set_data refused host entry ${op.key} (${bytes.length} bytes) into seq ${op.seqId}`);
    } else {
      this.#host.delete(op.key);
    }
    return null;
  }

  async execute(plan: RunnerPlan): Promise<StepResult> {
    if (this.#closed) bug('execute() on a closed LlamaRunner');
    if (this.#inflight !== null) bug('execute() called while a step is in flight');
    const t0 = performance.now();
    // KV operations first, in order. One that fails (or throws) leaves the ops before it applied and
    // the rest not: the runner says how many, and the engine stops (the scheduler's books would no
    // longer describe these cells).
    for (let i = 0; i < plan.kvOps.length; i++) {
      const op = plan.kvOps[i]!;
      let refusal: string | null;
      try {
        refusal = this.#applyKvOp(op);
      } catch (e) {
        refusal = e instanceof Error ? e.message : String(e);
      }
      if (refusal !== null) return { ok: false, reason: 'kv_ops_failed', appliedKvOps: i, message: refusal };
    }
    let numRows = 0;
    for (const item of plan.items) numRows += item.tokens.length;
    if (numRows === 0) return { ok: true, sampled: plan.items.map(() => null), computeMs: 0 };
    if (numRows > this.info.maxBatchTokens) {
      bug(`plan carries ${numRows} tokens, more than maxBatchTokens ${this.info.maxBatchTokens}`);
    }
    const layout = this.#splitSteps ? splitLayout(plan.items.map((item) => item.tokens.length)) : null;
    const items = layout === null ? plan.items : layout.order.map((i) => plan.items[i]!);
    const tokens = new Int32Array(numRows);
    const pos = new Int32Array(numRows);
    const seq = new Int32Array(numRows);
    const sample = new Uint8Array(numRows);
    let row = 0;
    for (const item of items) {
      if (item.tokens.length === 0) {
        if (item.sample) bug(`item ${item.requestId} asks for a sample with no tokens`);
        continue;
      }
      if (item.resetSampler && !this.#ctx.setSampler(item.seqId, samplerConfig(item))) {
        return { ok: false, reason: 'backend_error', message: `llama.cpp refused the grammar of ${item.requestId} (the API checks grammars first: a bug)` };
      }
      for (let j = 0; j < item.tokens.length; j++, row++) {
        tokens[row] = item.tokens[j]!;
        pos[row] = item.startPos + j;
        seq[row] = item.seqId;
      }
      if (item.sample) sample[row - 1] = 1;
    }
    const ends = layout?.segmentEnds;
    if (layout !== null) this.#numSplitSteps++;
    const inline = this.#runsInline(numRows);
    let res: AddonDecodeResult;
    if (inline) {
      res = this.#ctx.decodeSync(tokens, pos, seq, sample, ends);
    } else {
      this.#inflight = this.#ctx.decode(tokens, pos, seq, sample, ends);
      try {
        res = await this.#inflight;
      } finally {
        this.#inflight = null;
      }
    }
    if (numRows < this.#stepMsByRows.length) {
      const ms = res.workerUs / 1000;
      const last = this.#stepMsByRows[numRows]!;
      this.#stepMsByRows[numRows] = last < 0 ? ms : last + 0.2 * (ms - last);
    }
    this.#lastTiming = {
      rows: numRows,
      decodeUs: res.decodeUs,
      sampleUs: res.sampleUs,
      workerUs: res.workerUs,
      executeMs: performance.now() - t0,
      queueUs: res.queueUs,
      returnUs: res.returnUs,
      inline,
    };
    if (res.status === 1) {
      return { ok: false, reason: 'no_kv_slot', message: `llama.cpp found no KV slot for a batch of ${numRows} tokens` };
    }
    if (res.status === 3) {
      return { ok: false, reason: 'backend_error', message: `a sampler failed: ${res.message ?? 'unknown'}` };
    }
    if (res.status !== 0) {
      return { ok: false, reason: 'backend_error', message: `llama_decode returned ${res.status}` };
    }
    // Results come in row order (`items`); the step's result is in plan order.
    let k = 0;
    const inRowOrder = items.map((item) => (item.sample ? res.sampled[k++]! : null));
    const withLogprobs = res.topIds.length > 0 || res.chosenLogprob.some((v) => !Number.isNaN(v));
    const logprobsInRowOrder = withLogprobs ? unpackLogprobs(items, res) : null;
    const toPlanOrder = <T>(rows: T[]): T[] => {
      if (layout === null) return rows;
      const out = new Array<T>(rows.length);
      layout.order.forEach((i, j) => (out[i] = rows[j]!));
      return out;
    };
    const sampled = toPlanOrder(inRowOrder);
    const logprobs = logprobsInRowOrder === null ? null : toPlanOrder(logprobsInRowOrder);
    return { ok: true, sampled, ...(logprobs === null ? {} : { logprobs }), computeMs: res.decodeUs / 1000 };
  }

  /**
   * The engine is going to sleep: ggml's pool threads stop polling for the next graph now rather
   * than after ggml's polling budget (at its default level, ~130 ms of a core after every burst of
   * steps on a 2-core machine, docs/per-token.md §12). The next decode wakes them.
   */
  idle(): void {
    if (this.#closed || this.#inflight !== null) return;
    if (this.#ctx.pauseThreads()) this.#numPauses++;
    // With the host tier in use, the next save copies into memory made ready now, off this thread
    // (a save into fresh pages cost ~17 µs a token here: native/src/host_bytes.h).
    if (this.#largestSave > 0) this.#ctx.prepareHostBytes(this.#largestSave);
  }

  /** The process-wide warm host memory for saved sequences (native/src/host_bytes.h). */
  hostBytesStats(): AddonHostBytesStats {
    return this.#ctx.hostBytesStats();
  }

  /** How many times idle() paused the thread pool (for tests and /stats). */
  get numPauses(): number {
    return this.#numPauses;
  }

  /** How many steps ran as two llama_decode calls (step-layout.ts; for tests and benchmarks). */
  get numSplitSteps(): number {
    return this.#numSplitSteps;
  }

  /** A step of `numRows` rows runs on the JS thread when such steps have lately taken at most inlineStepMs. */
  #runsInline(numRows: number): boolean {
    if (this.#inlineStepMs === 0 || numRows >= this.#stepMsByRows.length) return false;
    const ms = this.#stepMsByRows[numRows]!;
    return ms >= 0 && ms <= this.#inlineStepMs;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#inflight !== null) await this.#inflight.catch(() => undefined);
    await this.tokenizer.settled();
    this.#ctx.close();
  }
}
