// Loads the native llama.cpp addon (native/build/Release/headroom_llama.node) and types its API.
// A missing or unloadable addon is an AddonNotBuiltError that says how to build it: asking for
// the llama runner without the addon is an error, never a silent fallback to the mock.
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);
const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../../../..');

/** The addon's interface version (native/src/addon.cpp): 3 added the sampler config object, checkGrammar and log-probabilities; 4 decodeSync and the hand-off times; 5 pauseThreads; 6 warm host memory (prepareHostBytes, hostBytesStats); 7 pinThreads and info().pinnedThreads; 8 decode segments (segmentEnds, numCalls). */
export const ADDON_ABI_VERSION = 9;

/** Where `npm install` (scripts/build-native.mjs) puts the addon. */
export const DEFAULT_ADDON_PATH = join(repoRoot, 'native', 'build', 'Release', 'headroom_llama.node');

export interface AddonContextOptions {
  readonly modelPath: string;
  /** Folder holding libggml-cpu-*.so, passed to ggml_backend_load_all_from_path. */
  readonly binsDir: string;
  /** KV cells in the unified pool; 0 = the model's trained context capped at nCtxMax. */
  readonly nCtx: number;
  readonly nCtxMax: number;
  readonly nSeqMax: number;
  readonly nBatch: number;
  readonly nUbatch: number;
  readonly threads: number;
  readonly threadsBatch: number;
  /**
   * Bind each pool thread to a CPU of its own and the decode's calling thread, for the decode, to
   * another (needs threads ≤ the process's CPUs, else ignored; see native/src/context.cpp).
   */
  readonly pinThreads?: boolean;
  /** Pass every llama.cpp log line through (default: warnings and errors only). */
  readonly verbose: boolean;
  /** Accept nCtx above the model's trained context; otherwise the constructor throws an error with code 'context_beyond_trained'. */
  readonly allowBeyondTrained?: boolean;
  /** Run llama_decode on one persistent ggml thread pool (default true); false: llama.cpp's pool made per graph. */
  readonly threadPool?: boolean;
  /** The pool's polling level between graphs, 0 (sleep at once) to 100 (spin hardest); default ggml's (50). */
  readonly threadPoll?: number;
}

/** One sequence's sampler chain, as setSampler takes it. */
export interface AddonSamplerConfig {
  /** <= 0: greedy (top-k, top-p, min-p and the seed are then unused). */
  readonly temperature: number;
  readonly topP: number;
  /** 0: off. */
  readonly topK: number;
  /** 0: off. */
  readonly minP: number;
  readonly seed: number;
  /** 1: off; over the prompt and the output. */
  readonly repetitionPenalty: number;
  /** 0: off; over the output only. */
  readonly frequencyPenalty: number;
  readonly presencePenalty: number;
  readonly logitBiasIds: Int32Array;
  readonly logitBiasValues: Float32Array;
  /** GBNF with a `root` rule; '' = none. */
  readonly grammar: string;
  /** The grammar constrains nothing until a trigger token or a text matching a trigger pattern (tool calls under tool_choice auto). */
  readonly grammarLazy: boolean;
  readonly triggerPatterns: readonly string[];
  readonly triggerTokens: Int32Array;
  /** Tokens the grammar accepts before the output (the chat format's generation prompt). */
  readonly grammarPrefill: Int32Array;
  /** -1: no log-probabilities; else alternatives reported per sampled token (0..20). */
  readonly logprobs: number;
  /** The sequence's tokens before the first one this chain samples (prompt, then earlier output). */
  readonly history: Int32Array;
  readonly numPromptTokens: number;
}

/** What one native decode resolved with. Times are C++-side, in microseconds. */
export interface AddonDecodeResult {
  /** llama_decode's return: 0 ok, 1 no KV slot, 2 aborted, -1 invalid batch, < -1 fatal; 3: a sampler threw (see message). */
  readonly status: number;
  /** One sampled token per row whose sample flag was set, in row order (empty unless status is 0). */
  readonly sampled: Int32Array;
  /** Per sampled row: the chosen token's log-probability under the raw logits (NaN where the sequence did not ask). */
  readonly chosenLogprob: Float32Array;
  /** Per sampled row: how many alternatives it has in topIds/topLogprobs (0 where not asked). */
  readonly numTop: Int32Array;
  /** The alternatives of every sampled row, flattened in row order, most probable first. */
  readonly topIds: Int32Array;
  readonly topLogprobs: Float32Array;
  /** Why sampling failed (status 3). */
  readonly message?: string;
  /** llama_decode calls made (one per segment; fewer when one failed). */
  readonly numCalls: number;
  /** Wall time of llama_decode alone (all calls). */
  readonly decodeUs: number;
  /** Wall time of sampling every flagged row. */
  readonly sampleUs: number;
  /** Wall time of the whole worker body (batch fill + decode + sampling). */
  readonly workerUs: number;
  /** From the call to the worker body starting on a pool thread (≈ 0 for decodeSync). */
  readonly queueUs: number;
  /** From the worker body ending to the result reaching the JS thread (0 for decodeSync). */
  readonly returnUs: number;
}

export interface AddonContextInfo {
  readonly description: string;
  readonly numParams: number;
  readonly modelBytes: number;
  readonly nCtx: number;
  readonly nCtxTrain: number;
  readonly nBatch: number;
  readonly nUbatch: number;
  readonly nSeqMax: number;
  readonly nVocab: number;
  readonly bos: number;
  readonly eos: number;
  readonly addBos: boolean;
  readonly threads: number;
  readonly threadsBatch: number;
  /** A persistent thread pool is attached (see AddonContextOptions.threadPool). */
  readonly threadPool: boolean;
  /** Its polling level (-1 without a pool). */
  readonly threadPoll: number;
  /** The pool's threads and the decode's caller are bound to CPUs of their own (pinThreads took effect). */
  readonly pinnedThreads: boolean;
  /** Most bytes of input text one token stands for (longest rendered piece, special tokens included); 0 = no such bound (see fast_tokenizer.h). */
  readonly maxTokenBytes: number;
  /** The linear tokenizer (native/src/fast_tokenizer.h) is in use; false: llama_tokenize for everything. */
  readonly fastTokenizer: boolean;
  /** How raw text is tokenized: 'spm' (the addon's SPM merge), 'per-fragment' (llama_tokenize per fragment between special tokens) or 'llama_tokenize'. */
  readonly tokenizerPath: string;
  /** How special tokens are split out: 'one-pass' (a trie, when no two special texts can overlap) or 'per-token' (llama.cpp's order, one pass per special token). */
  readonly specialSplit: string;
  /** llama.cpp's warnings while loading the model (one per line; all its lines with verbose). */
  readonly loadLog: string;
}

/** What chatInit says about the chat template it loaded. */
export interface AddonChatInfo {
  /** 'gguf', 'override' or 'chatml (none in GGUF)'. */
  readonly source: string;
  readonly toolUseTemplate: boolean;
  /** The template renders a thinking block (enable_thinking defaults to true then, as in llama-server). */
  readonly supportsThinking: boolean;
  readonly caps: Readonly<Record<string, boolean>>;
  /** The template's source text. */
  readonly template: string;
}

/** chatRender's result: the prompt text, its literal byte ranges (message text spelling control tokens) and the format params (JSON). */
export interface AddonChatRendered {
  readonly prompt: string;
  readonly literal: Int32Array;
  readonly params: string;
}

/** What a tokenization off the JS thread resolved with. */
export interface AddonTokenizeResult {
  /** 0 ok; for chat: 1 a request llama.cpp's chat code refuses, 2 the template failed on it (`error` says why). */
  readonly status: number;
  readonly tokens: Int32Array;
  /** Wall time of the worker body (templating + tokenizing), µs. */
  readonly workerUs: number;
  /** Chat only: the format params (JSON) and the refusal's message. */
  readonly params?: string;
  readonly error?: string;
}

/** llama.cpp's chat output parser for one response (native/src/chat_parser.h); returns JSON. */
export interface AddonChatParser {
  update(textAdded: string, isPartial: boolean): string;
}

/** The native object: one model + one context (see native/src/context.h for its invariants). */
export interface AddonContext {
  /**
   * Rows are column-wise: row i is (tokens[i], pos[i], seq[i], sample[i] != 0). Runs off the JS
   * thread. With segmentEnds (increasing, the last = the row count) each segment of rows is a
   * llama_decode of its own, sampled before the next; a failed one removes what the earlier wrote.
   */
  decode(tokens: Int32Array, pos: Int32Array, seq: Int32Array, sample: Uint8Array, segmentEnds?: Int32Array): Promise<AddonDecodeResult>;
  /** The same step on the JS thread, which it blocks until done: no thread hand-off either way. */
  decodeSync(tokens: Int32Array, pos: Int32Array, seq: Int32Array, sample: Uint8Array, segmentEnds?: Int32Array): AddonDecodeResult;
  /**
   * A fresh sampler chain for `seq` (order in native/src/context.cpp SetSampler); false when the
   * grammar does not parse or does not accept the history (the sequence then samples greedily).
   */
  setSampler(seq: number, config: AddonSamplerConfig): boolean;
  /** Whether llama.cpp parses `gbnf` (root rule `root`) for this vocabulary; on the calling thread. */
  checkGrammar(gbnf: string): boolean;
  /** llama_memory_seq_cp: tag src's cells in [p0, p1) as also belonging to dst (p1 < 0: to the end). */
  seqCopy(src: number, dst: number, p0: number, p1: number): void;
  /** llama_memory_seq_rm; false when a partial removal is impossible. */
  seqRemove(seq: number, p0: number, p1: number): boolean;
  /** Largest position held for `seq`, -1 if none. */
  seqPosMax(seq: number): number;
  /** llama_state_seq_get_data: `seq`'s cells (positions, K, V) copied into host memory; on the calling thread. */
  seqStateGet(seq: number): Buffer;
  /** llama_state_seq_set_data: cells from seqStateGet placed back as `seq`'s; false when too few cells are free (or the bytes are another context's). */
  seqStateSet(seq: number, bytes: Buffer): boolean;
  memoryClear(): void;
  /** ggml_threadpool_pause: the pool's threads sleep now instead of polling for the next graph (the next decode wakes them); false without a pool. */
  pauseThreads(): boolean;
  /** Idle time: map and touch `bytes` of host memory on a libuv pool thread for the next seqStateGet (native/src/host_bytes.h); false when warm memory that large waits already or a fill runs. */
  prepareHostBytes(bytes: number): boolean;
  /** The process-wide warm host memory: mappings waiting, their bytes, fills done, saves into warm and into fresh memory. */
  hostBytesStats(): AddonHostBytesStats;
  /** On the calling thread; `viaLlama` bypasses the linear tokenizer (tests compare the two). */
  tokenize(text: string, addSpecial: boolean, parseSpecial: boolean, viaLlama?: boolean): Int32Array;
  /** Special tokens parsed unless `asText`; runs on the libuv pool. */
  tokenizeAsync(text: string | Buffer, addSpecial: boolean, asText?: boolean): Promise<AddonTokenizeResult>;
  /** Loads the chat template (the GGUF's, `override` when not '', ChatML when neither); throws when it does not parse. */
  chatInit(override: string): string;
  /** The request (OpenAI's chat shapes, JSON) rendered on the calling thread; throws a TypeError for a request the chat code refuses. */
  chatRender(requestJson: string, literalControlText: boolean): AddonChatRendered;
  /** The request rendered and tokenized on the libuv pool (see AddonTokenizeResult.status). */
  chatTokenizeAsync(requestJson: string, literalControlText: boolean): Promise<AddonTokenizeResult>;
  /** The raw bytes a token stands for (a byte-fallback token gives one byte; control tokens give none unless `special`). */
  tokenPiece(token: number, special?: boolean): Buffer;
  isEog(token: number): boolean;
  info(): AddonContextInfo;
  close(): void;
}

export interface AddonHostBytesStats {
  readonly numWarm: number;
  readonly warmBytes: number;
  readonly numFills: number;
  readonly numWarmTakes: number;
  readonly numColdTakes: number;
}

export interface LlamaAddon {
  readonly HeadroomLlama: new (options: AddonContextOptions) => AddonContext;
  readonly ChatParser: new (paramsJson: string) => AddonChatParser;
  readonly abiVersion: number;
}

export class AddonNotBuiltError extends Error {
  readonly code = 'llama_addon_not_built';
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'AddonNotBuiltError';
  }
}

const HOW_TO_BUILD =
  'Build it with `npm install` (or `node scripts/build-native.mjs`) on linux-x64, or run with --runner mock.';

const loaded = new Map<string, LlamaAddon>();

/** Loads the addon at `path` (default: native/build/Release/headroom_llama.node). */
export function loadLlamaAddon(path: string = DEFAULT_ADDON_PATH): LlamaAddon {
  const cached = loaded.get(path);
  if (cached !== undefined) return cached;
  if (!existsSync(path)) {
    throw new AddonNotBuiltError(`The llama.cpp addon is not built: ${path} does not exist. ${HOW_TO_BUILD}`);
  }
  let addon: LlamaAddon;
  try {
    addon = require(path) as LlamaAddon;
  } catch (err) {
    throw new AddonNotBuiltError(`The llama.cpp addon at ${path} could not be loaded (${String(err)}). ${HOW_TO_BUILD}`, {
      cause: err,
    });
  }
  if (addon.abiVersion !== ADDON_ABI_VERSION || typeof addon.HeadroomLlama !== 'function') {
    throw new AddonNotBuiltError(`The llama.cpp addon at ${path} is stale (abiVersion ${addon.abiVersion}, expected ${ADDON_ABI_VERSION}). ${HOW_TO_BUILD}`);
  }
  loaded.set(path, addon);
  return addon;
}

/** The folder of prebuilt libllama/libggml binaries in @node-llama-cpp/linux-x64. */
export function llamaBinsDir(): string {
  const name = '@node-llama-cpp/linux-x64';
  // The package's "exports" hide package.json, so look for its folder on the resolution paths.
  for (const base of require.resolve.paths(name) ?? []) {
    const dir = join(base, name, 'bins', 'linux-x64');
    if (existsSync(dir)) return dir;
  }
  throw new AddonNotBuiltError(`${name} is not installed, so llama.cpp's binaries are missing. ${HOW_TO_BUILD}`);
}
