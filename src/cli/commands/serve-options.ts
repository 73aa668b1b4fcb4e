// The option table of `headroom serve`: the serving options it shares with `gateway`
// (front-door-options.ts, admission-options.ts) and its own — the runner, the engine's scheduler
// and KV cache, the flight recorder. Each value is checked alone by its parser; serve.ts checks
// what involves two options (--inline-step-ms with --overlap-dispatch) or needs a directory to
// write in (--record, --admission-state).
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { LLAMA_TEMPLATES_DIR } from '../../model/default-model.ts';
import { DEFAULT_RECORDER_LIMITS, MIN_SEGMENT_BYTES } from '../../obs/recorder/recorder.ts';
import { EXIT_CODES } from '../startup-errors.ts';
import { anyText, existingDir, existingFile, int, intAtLeast0, intAtLeast1, nonEmptyText, num, numberIn, orWords, positiveNumber, reporting } from '../option-parsers.ts';
import type { OptionValues } from '../option-table.ts';
import { choice, flag, list, opt } from '../option-table.ts';
import { admissionOptions } from './admission-options.ts';
import { FLOW_OPTIONS, SERVER_OPTIONS } from './front-door-options.ts';

/** --chat-template: the text of a Jinja file, of one of llama.cpp's shipped templates by name, or 'chatml'. */
function chatTemplateSource(v: string): string {
  if (v === 'chatml') return v;
  if (existsSync(v)) {
    try {
      return readFileSync(v, 'utf8');
    } catch (err) {
      throw new Error(`cannot read ${v} (${(err as NodeJS.ErrnoException).code ?? String(err)})`, { cause: err });
    }
  }
  const named = join(LLAMA_TEMPLATES_DIR, `${v}.jinja`);
  if (/^[\w.-]+$/.test(v) && existsSync(named)) return readFileSync(named, 'utf8');
  throw new Error(`${v} is neither a file nor a template llama.cpp ships (see ${LLAMA_TEMPLATES_DIR}), nor 'chatml'`);
}

const SERVE_OWN_OPTIONS = [
  choice('--runner <runner>', 'model runner', ['llama', 'mock'], 'llama'),
  opt('--model <file>', 'GGUF model to serve (default: the generated tiny model)', existingFile),
  opt('--threads <n>', 'llama.cpp threads', intAtLeast1, { default: '2' }),
  opt('--inline-step-ms <ms>', 'llama: run a step on the event-loop thread when steps of its size lately took at most this long, saving two thread hand-offs a step (0: every step on a pool thread; default 5, or 0 with --overlap-dispatch on)', num('a number of ms ≥ 0', (n) => n >= 0)),
  opt('--ctx <cells>', "KV cells in the unified pool (default: the model's trained context, at most 8192; mock: 8192)", intAtLeast1),
  flag('--ctx-beyond-trained', "allow --ctx above the model's trained context (GGUF <architecture>.context_length)"),
  opt('--chat-template <file|name>', "llama: the chat template to use instead of the GGUF's: a Jinja file, or the name of one of llama.cpp's (models/templates/NAME.jinja in native/vendor/llama.cpp, e.g. Qwen-Qwen2.5-7B-Instruct), or 'chatml'", reporting(chatTemplateSource)),
  flag('--special-in-messages', 'llama: parse text in chat messages that spells a control token (<|im_end|>, ...) as that token, as llama-server and vLLM do; default: it stays text, so a message cannot forge a turn'),
  choice('--prompt-special <mode>', "llama: how /v1/completions prompts treat control-token text: 'parse' (as llama-server and vLLM) or 'text'", ['parse', 'text'], 'parse'),
  opt('--parallel <n>', 'sequence ids (most requests running at once)', intAtLeast1, { default: '16' }),
  opt('--batch-tokens <n>', 'most tokens in one forward pass; a step in which nothing decodes may fill it (llama.cpp computes it in micro-batches of at most 512)', intAtLeast1, { default: '2048' }),
  choice('--scheduler <name>', 'scheduling policy', ['fifo', 'static', 'continuous'], 'continuous'),
  choice('--kv <mode>', 'KV accounting', ['paged', 'contiguous'], 'paged'),
  choice('--prefix-cache <on|off>', 'radix prefix cache (paged KV only)', ['on', 'off'], 'on'),
  opt('--block-size <tokens>', 'KV block size', intAtLeast1, { default: '16' }),
  opt('--cache-max-fraction <f>', "most of the KV pool idle cached prefixes may keep, [0, 1] (0: none, an idle prefix waits in host memory with --cache-host-tokens), or 'auto': 0 with --cache-host-tokens, else 1", orWords(['auto'], numberIn('[0, 1]'), "a number in [0, 1] or 'auto'"), { default: 'auto' }),
  choice('--pin-threads <on|off>', "llama: bind each of llama.cpp's threads to a CPU of its own while it computes (needs --threads ≤ the CPUs allowed; two pinned servers on one host would share CPUs)", ['on', 'off'], 'off'),
  choice('--split-steps <on|off>', "llama: compute a step's decoding rows in a llama_decode call apart from its prompt chunks (batched together, llama.cpp's CPU flash attention walks every decoder's context for a chunk's first 64 rows)", ['on', 'off'], 'on'),
  choice('--overlap-dispatch <on|off>', "hand a step's tokens to the clients while the next step computes (on), or before it starts (off)", ['on', 'off'], 'off'),
  opt('--cache-host-tokens <n>', 'tokens of finished sequences the prefix cache keeps in host memory and places back when a later prompt begins with one (0: off; about 5 KB a token on the tiny model)', intAtLeast0, { default: '0' }),
  choice('--cache-retain <what>', "what the prefix cache keeps of a computed prompt: 'seen' (the part an earlier prompt also had; a retained unique prompt slows every decode) or 'all'; with --cache-max-fraction 0 nothing is kept after a request and every prompt is shared while it runs", ['seen', 'all'], 'seen'),
  opt('--kv-watermark <f>', 'share of KV blocks a new request must leave free while others run (room for their decode growth), [0, 0.5]', num('a share of the KV blocks in [0, 0.5]', (n) => n >= 0 && n <= 0.5), { default: '0.01' }),
  opt('--max-preemptions <n>', 'a request preempted this many times is not preempted again before it finishes', intAtLeast0, { default: '2' }),
  opt('--prefill-chunk <tokens>', 'most prompt tokens per step, all requests together (bounds step time and so ITL; rounded so a step has a multiple of 64 rows)', intAtLeast1, { default: '256' }),
  opt('--step-target-ms <ms|auto|off>', "time a prompt chunk may add to a step with decoding requests (ms), sized from what chunks were measured to add, or 'auto' (twice what a --prefill-chunk chunk adds at the start of a prompt); a tight target keeps streams' ITL through a long prompt at the price of that prompt's own prefill. 'off': every step capped at --prefill-chunk tokens", orWords(['auto', 'off'], positiveNumber, "a positive number of ms, 'auto' or 'off'"), { default: 'off' }),
  opt('--step-min-chunk <tokens>', 'with --step-target-ms: the smallest prompt chunk a step beside decoding requests gets (1 lets a chunk deep in a long prompt shrink to what the target allows; fewer than 64 rows cost more per token)', intAtLeast1, { default: '64' }),
  choice('--priority <p>', 'who gets the step budget first', ['prefill-first', 'decode-first'], 'decode-first'),
  opt('--static-batch <n>', 'static scheduler: batch size', intAtLeast1, { default: '8' }),
  opt('--static-wait-ms <ms>', 'static scheduler: longest wait to fill a batch', intAtLeast0, { default: '50' }),
  opt('--max-queued <n>', 'most requests held in memory', intAtLeast1, { default: '1024' }),
  opt('--mock-speed <x>', 'mock runner cost multiplier', num('a number ≥ 0 (0: as fast as the event loop allows)', (n) => n >= 0), { default: '1' }),
  choice('--admission-self-train <on|off>', 'without --admission-artifact: fit a quantile GBDT on the outcomes the server admits (in a worker thread) and swap it in, calibrated on the newest of them, when it beats the current predictor on those', ['on', 'off'], 'off'),
  opt('--admission-state <dir|off>', "keep what admission control learns here and start from it after a restart on the same runner, model, machine and admission settings (anything else starts cold, with one line); default: a directory per listening address under $XDG_STATE_HOME/headroom/admission (~/.local/state without it), none on port 0; 'off': learn from scratch at every start", nonEmptyText),
  opt('--record <dir>', 'flight recorder: write step records, admission decisions, finishes and refusals to a new run folder in this directory (JSON lines; /dashboard?run=NAME replays it)', nonEmptyText),
  opt('--record-max-bytes <bytes>', 'flight recorder: largest segment file; a full one rotates to the next', int(`at least ${MIN_SEGMENT_BYTES} bytes`, (n) => n >= MIN_SEGMENT_BYTES), { default: String(DEFAULT_RECORDER_LIMITS.maxSegmentBytes) }),
  opt('--record-max-files <n>', 'flight recorder: most segment files kept per run; the oldest is deleted', intAtLeast1, { default: String(DEFAULT_RECORDER_LIMITS.maxSegments) }),
  list('--dashboard-runs <dirs...>', 'more directories of recorded runs the dashboard can open (besides --record)', existingDir),
  // Names are checked by serverConfig() (api/config.ts), the one place that knows their form.
  list('--served-model-name <names...>', "names the model answers to (requests must use one; /v1/models lists them); default: the model file's stem", anyText),
];

export const SERVE_OPTIONS = [
  ...SERVER_OPTIONS,
  ...SERVE_OWN_OPTIONS,
  ...admissionOptions('conformal'),
  ...FLOW_OPTIONS,
  flag('--no-exit-on-engine-failure', `stay up with /health at 503 when the engine fails, instead of exiting with status ${EXIT_CODES.engineFailure}`),
];

export type ServeOptions = OptionValues<typeof SERVE_OPTIONS>;
