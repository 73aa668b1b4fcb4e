// `headroom serve`: run the OpenAI-compatible server in engine mode.
//
// Order: parse flags → listen (a busy port fails here, in milliseconds) → load the model → warm up
// → ready. A startup failure is one line on stderr and exit code 1; the exit codes are listed in
// cli/startup-errors.ts, `serve --help` and docs/serving.md. SIGTERM/SIGINT drains (exit 0, or 2 when
// the drain deadline cuts requests); a second signal during the drain exits at once (3).

import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { stat } from 'node:fs/promises';
import type { Command } from 'commander';
import { Option } from 'commander';
import type { Headroom } from '../../app.ts';
import type { SchedulerName } from '../../engine/scheduler/factory.ts';
import { createRunner } from '../../engine/runner/factory.ts';
import { EXIT_CODES, StartupError, startupErrorLine } from '../startup-errors.ts';
import type { AdmissionConfig } from '../../admission/factory.ts';
import { fileSha256, machineIdentity } from '../../admission/provenance.ts';
import { DEFAULT_MODEL_PATH, LLAMA_TEMPLATES_DIR } from '../../model/default-model.ts';
import { DEFAULT_RECORDER_LIMITS, MIN_SEGMENT_BYTES } from '../../obs/recorder/recorder.ts';
import type { EffectiveConfig } from '../config.ts';
import { effectiveConfig, originNote } from '../config.ts';
import { debugEnabled } from '../user-error.ts';
import { prepareWritableDir } from '../writable-dir.ts';
import { addFlowOptions, addServerOptions, checkTraceOut, flowOption, int, keysOf, nonNegativeInt, number, onSignals, otelEndpointOf, serverConfigOf } from './front-door.ts';
import type { FlowFlags, ServerFlags } from './front-door.ts';
import { addAdmissionOptions, admissionBase } from './admission-options.ts';
import type { AdmissionFlags } from './admission-options.ts';

interface ServeFlags extends ServerFlags, FlowFlags, AdmissionFlags {
  admissionState?: string;
  admissionSelfTrain: 'on' | 'off';
  runner: 'llama' | 'mock';
  model?: string;
  threads: string;
  inlineStepMs?: string;
  ctx?: string;
  ctxBeyondTrained: boolean;
  chatTemplate?: string;
  specialInMessages: boolean;
  promptSpecial: 'parse' | 'text';
  parallel: string;
  batchTokens: string;
  scheduler: SchedulerName;
  maxQueued: string;
  mockSpeed: string;
  kv: 'paged' | 'contiguous';
  prefixCache: 'on' | 'off';
  blockSize: string;
  prefillChunk?: string;
  stepTargetMs: string;
  stepMinChunk: string;
  priority: 'prefill-first' | 'decode-first';
  staticBatch: string;
  staticWaitMs: string;
  cacheMaxFraction: string;
  cacheRetain: 'all' | 'seen';
  overlapDispatch: 'on' | 'off';
  pinThreads: 'on' | 'off';
  splitSteps: 'on' | 'off';
  cacheHostTokens: string;
  kvWatermark: string;
  maxPreemptions: string;
  exitOnEngineFailure: boolean;
  servedModelName?: string[];
  record?: string;
  recordMaxBytes: string;
  recordMaxFiles: string;
  dashboardRuns?: string[];
}

const stepTarget = (v: string): number | 'auto' | 'off' => {
  if (v === 'auto' || v === 'off') return v;
  const n = Number(v);
  if (v.trim() === '' || !(n > 0) || !Number.isFinite(n)) throw new StartupError(`--step-target-ms: expected a positive number of ms, 'auto' or 'off', got '${v}'`);
  return n;
};

const EXIT_HELP = `
Exit codes:
  ${EXIT_CODES.drained}  stopped cleanly: every in-flight request finished (drained)
  ${EXIT_CODES.startupFailure}  could not start (bad flag, port in use, model missing or unreadable, --ctx above
     the model's trained context, addon not built); the reason is one line on stderr
  ${EXIT_CODES.drainDeadline}  the drain deadline (--drain-timeout-ms) passed: requests still running got an error
  ${EXIT_CODES.forced}  a second SIGINT/SIGTERM during the drain: exited at once
  ${EXIT_CODES.engineFailure} the engine's step loop failed (a bug): every request it held ended with engine_failure,
     /health turned 503, the last step records are in the log (--no-exit-on-engine-failure: stay up)`;

export function registerServeCommand(program: Command): void {
  const cmd = program
    .command('serve', { isDefault: true })
    .description('serve the OpenAI API on a local model (engine mode)')
    .showHelpAfterError(false)
    .configureOutput({ outputError: (str, write) => write(`headroom: ${str.trimEnd()} (see headroom serve --help)\n`) })
    .addHelpText('after', EXIT_HELP);
  addServerOptions(cmd)
    .addOption(new Option('--runner <runner>', 'model runner').choices(['llama', 'mock']).default('llama'))
    .option('--model <file>', 'GGUF model to serve (default: the generated tiny model)')
    .option('--threads <n>', 'llama.cpp threads', '2')
    .option('--inline-step-ms <ms>', 'llama: run a step on the event-loop thread when steps of its size lately took at most this long, saving two thread hand-offs a step (0: every step on a pool thread; default 5, or 0 with --overlap-dispatch on)')
    .option('--ctx <cells>', "KV cells in the unified pool (default: the model's trained context, at most 8192; mock: 8192)")
    .option('--ctx-beyond-trained', "allow --ctx above the model's trained context (GGUF <architecture>.context_length)", false)
    .option('--chat-template <file|name>', "llama: the chat template to use instead of the GGUF's: a Jinja file, or the name of one of llama.cpp's (models/templates/NAME.jinja in native/vendor/llama.cpp, e.g. Qwen-Qwen2.5-7B-Instruct), or 'chatml'")
    .option('--special-in-messages', 'llama: parse text in chat messages that spells a control token (<|im_end|>, ...) as that token, as llama-server and vLLM do; default: it stays text, so a message cannot forge a turn', false)
    .addOption(new Option('--prompt-special <mode>', "llama: how /v1/completions prompts treat control-token text: 'parse' (as llama-server and vLLM) or 'text'").choices(['parse', 'text']).default('parse'))
    .option('--parallel <n>', 'sequence ids (most requests running at once)', '16')
    .option('--batch-tokens <n>', 'most tokens in one forward pass; a step in which nothing decodes may fill it (llama.cpp computes it in micro-batches of at most 512)', '2048')
    .addOption(new Option('--scheduler <name>', 'scheduling policy').choices(['fifo', 'static', 'continuous']).default('continuous'))
    .addOption(new Option('--kv <mode>', 'KV accounting').choices(['paged', 'contiguous']).default('paged'))
    .addOption(new Option('--prefix-cache <on|off>', 'radix prefix cache (paged KV only)').choices(['on', 'off']).default('on'))
    .option('--block-size <tokens>', 'KV block size', '16')
    .option('--cache-max-fraction <f>', "most of the KV pool idle cached prefixes may keep, [0, 1] (0: none, an idle prefix waits in host memory with --cache-host-tokens), or 'auto': 0 with --cache-host-tokens, else 1", 'auto')
    .addOption(
      new Option('--pin-threads <on|off>', "llama: bind each of llama.cpp's threads to a CPU of its own while it computes (needs --threads ≤ the CPUs allowed; two pinned servers on one host would share CPUs)")
        .choices(['on', 'off'])
        .default('off'),
    )
    .addOption(
      new Option('--split-steps <on|off>', "llama: compute a step's decoding rows in a llama_decode call apart from its prompt chunks (batched together, llama.cpp's CPU flash attention walks every decoder's context for a chunk's first 64 rows)")
        .choices(['on', 'off'])
        .default('on'),
    )
    .addOption(new Option('--overlap-dispatch <on|off>', "hand a step's tokens to the clients while the next step computes (on), or before it starts (off)").choices(['on', 'off']).default('off'))
    .option('--cache-host-tokens <n>', "tokens of finished sequences the prefix cache keeps in host memory and places back when a later prompt begins with one (0: off; about 5 KB a token on the tiny model)", '0')
    .addOption(new Option('--cache-retain <what>', "what the prefix cache keeps of a computed prompt: 'seen' (the part an earlier prompt also had; a retained unique prompt slows every decode) or 'all'; with --cache-max-fraction 0 nothing is kept after a request and every prompt is shared while it runs").choices(['seen', 'all']).default('seen'))
    .option('--kv-watermark <f>', 'share of KV blocks a new request must leave free while others run (room for their decode growth), [0, 0.5]', '0.01')
    .option('--max-preemptions <n>', 'a request preempted this many times is not preempted again before it finishes', '2')
    .option('--prefill-chunk <tokens>', 'most prompt tokens per step, all requests together (bounds step time and so ITL; rounded so a step has a multiple of 64 rows)', '256')
    .option('--step-target-ms <ms|auto|off>', "time a prompt chunk may add to a step with decoding requests (ms), sized from what chunks were measured to add, or 'auto' (twice what a --prefill-chunk chunk adds at the start of a prompt); a tight target keeps streams' ITL through a long prompt at the price of that prompt's own prefill. 'off': every step capped at --prefill-chunk tokens", 'off')
    .option('--step-min-chunk <tokens>', 'with --step-target-ms: the smallest prompt chunk a step beside decoding requests gets (1 lets a chunk deep in a long prompt shrink to what the target allows; fewer than 64 rows cost more per token)', '64')
    .addOption(new Option('--priority <p>', 'who gets the step budget first').choices(['prefill-first', 'decode-first']).default('decode-first'))
    .option('--static-batch <n>', 'static scheduler: batch size', '8')
    .option('--static-wait-ms <ms>', 'static scheduler: longest wait to fill a batch', '50')
    .option('--max-queued <n>', 'most requests held in memory', '1024')
    .option('--mock-speed <x>', 'mock runner cost multiplier', '1')
    .addOption(new Option('--admission-self-train <on|off>', 'without --admission-artifact: fit a quantile GBDT on the outcomes the server admits (in a worker thread) and swap it in, calibrated on the newest of them, when it beats the current predictor on those').choices(['on', 'off']).default('off'))
    .option('--admission-state <dir>', 'keep what admission control learns here and start from it after a restart on the same runner, model, machine and admission settings (anything else starts cold, with one line)')
    .option('--record <dir>', 'flight recorder: write step records, admission decisions, finishes and refusals to a new run folder in this directory (JSON lines; /dashboard?run=NAME replays it)')
    .option('--record-max-bytes <bytes>', 'flight recorder: largest segment file; a full one rotates to the next', String(DEFAULT_RECORDER_LIMITS.maxSegmentBytes))
    .option('--record-max-files <n>', 'flight recorder: most segment files kept per run; the oldest is deleted', String(DEFAULT_RECORDER_LIMITS.maxSegments))
    .option('--dashboard-runs <dirs...>', 'more directories of recorded runs the dashboard can open (besides --record)')
    .option('--served-model-name <names...>', "names the model answers to (requests must use one; /v1/models lists them); default: the model file's stem");
  addFlowOptions(addAdmissionOptions(cmd, 'conformal'))
    .option('--no-exit-on-engine-failure', `stay up with /health at 503 when the engine fails, instead of exiting with status ${EXIT_CODES.engineFailure}`)
    .action(async (f: ServeFlags, cmd: Command) => {
      const where = { host: f.host, port: Number(f.port) };
      let headroom: Headroom;
      try {
        headroom = await build(f, effectiveConfig(cmd));
        // Listening and ready lines come from the server's logger.
        await headroom.listen();
        onSignals(headroom);
        await headroom.load();
      } catch (err) {
        const line = startupErrorLine(err, where);
        console.error(`headroom: error: ${line}${originNote(cmd, line)}`);
        if (debugEnabled() && err instanceof Error) console.error(err.stack);
        process.exit(EXIT_CODES.startupFailure);
      }
    });
}

/** --chat-template: a Jinja file, one of llama.cpp's shipped templates by name, or 'chatml'. */
function chatTemplateSource(v: string): string {
  if (v === 'chatml') return v;
  if (existsSync(v)) {
    try {
      return readFileSync(v, 'utf8');
    } catch (err) {
      throw new StartupError(`--chat-template: cannot read ${v} (${(err as NodeJS.ErrnoException).code ?? String(err)})`, { cause: err });
    }
  }
  const named = join(LLAMA_TEMPLATES_DIR, `${v}.jinja`);
  if (/^[\w.-]+$/.test(v) && existsSync(named)) return readFileSync(named, 'utf8');
  throw new StartupError(`--chat-template: ${v} is neither a file nor a template llama.cpp ships (see ${LLAMA_TEMPLATES_DIR}), nor 'chatml'`);
}

/** Overlapped dispatch hands a step's tokens out while the next step computes: an inline step would hold them a whole step. */
function inlineStepMs(f: ServeFlags): number {
  const overlap = f.overlapDispatch === 'on';
  if (f.inlineStepMs === undefined) return overlap ? 0 : DEFAULT_INLINE_STEP_MS;
  const ms = number('inline-step-ms', f.inlineStepMs, (n) => n >= 0, 'a number of ms ≥ 0');
  if (ms > 0 && overlap) throw new StartupError(`--inline-step-ms ${f.inlineStepMs} with --overlap-dispatch on: a step run on the event-loop thread leaves no time to overlap; pass --inline-step-ms 0`);
  return ms;
}

/** Steps up to this long run inline by default: a decode step of the tiny or small model (docs/per-token.md §10). */
const DEFAULT_INLINE_STEP_MS = 5;

async function build(f: ServeFlags, config: EffectiveConfig): Promise<Headroom> {
  const server = serverConfigOf(f, { servedModelNames: f.servedModelName ?? [] });
  const keys = keysOf(f);
  if (f.model !== undefined && !existsSync(f.model)) throw new StartupError(`--model: file not found: ${f.model}`);
  const runnerConfig = {
    runner: f.runner,
    ...(f.model === undefined ? {} : { modelPath: f.model }),
    threads: int('threads', f.threads),
    inlineStepMs: inlineStepMs(f),
    pinThreads: f.pinThreads === 'on',
    splitSteps: f.splitSteps === 'on',
    ...(f.ctx === undefined ? {} : { contextTokens: int('ctx', f.ctx) }),
    contextBeyondTrained: f.ctxBeyondTrained,
    maxSequences: int('parallel', f.parallel),
    maxBatchTokens: int('batch-tokens', f.batchTokens),
    microBatchTokens: Math.min(512, int('batch-tokens', f.batchTokens)),
    mockSpeed: number('mock-speed', f.mockSpeed, (n) => n >= 0, 'a number ≥ 0 (0: as fast as the event loop allows)'),
    ...(f.chatTemplate === undefined ? {} : { chatTemplate: chatTemplateSource(f.chatTemplate) }),
    parseSpecialInMessages: f.specialInMessages,
    promptSpecialAsText: f.promptSpecial === 'text',
  };
  const admission = await admissionConfig(f);
  await checkTraceOut(f.traceOut);
  const record = await recordOption(f);
  const dashboardRuns = await dashboardRunsOption(f.dashboardRuns ?? []);
  // Imported here, after the flags are checked: `--help` and a bad flag never load the server and OpenTelemetry.
  const { Headroom } = await import('../../app.ts');
  return new Headroom({
    runner: async () => {
      try {
        return await createRunner(runnerConfig);
      } catch (err) {
        const e = err as Error & { code?: string };
        if (e.code === 'context_beyond_trained') throw new StartupError(`--ctx: ${e.message}; pass --ctx-beyond-trained to use it anyway`, { cause: err });
        throw err;
      }
    },
    server,
    scheduler: {
      scheduler: f.scheduler,
      kv: f.kv,
      prefixCache: f.kv === 'paged' && f.prefixCache === 'on',
      blockSize: int('block-size', f.blockSize),
      ...(f.prefillChunk === undefined ? {} : { prefillChunkTokens: int('prefill-chunk', f.prefillChunk) }),
      stepTarget: stepTarget(f.stepTargetMs),
      stepMinChunkTokens: number('step-min-chunk', f.stepMinChunk, (n) => Number.isInteger(n) && n >= 1, 'a whole number >= 1'),
      priority: f.priority,
      staticBatchSize: int('static-batch', f.staticBatch),
      staticWaitMs: int('static-wait-ms', f.staticWaitMs),
      ...(f.cacheMaxFraction === 'auto' ? {} : { cacheMaxFraction: number('cache-max-fraction', f.cacheMaxFraction, (n) => n >= 0 && n <= 1, "a number in [0, 1] or 'auto'") }),
      cacheRetain: f.cacheRetain,
      hostTierTokens: nonNegativeInt('cache-host-tokens', f.cacheHostTokens),
      kvWatermark: number('kv-watermark', f.kvWatermark, (n) => n >= 0 && n <= 0.5, 'a share of the KV blocks in [0, 0.5]'),
      maxPreemptions: int('max-preemptions', f.maxPreemptions),
    },
    maxQueuedRequests: int('max-queued', f.maxQueued),
    overlapDispatch: f.overlapDispatch === 'on',
    obs: { metrics: f.metrics, ...otelEndpointOf(f) },
    ...(f.traceOut === undefined ? {} : { traceOut: f.traceOut }),
    admission,
    keys,
    ...flowOption(f),
    ...(record === undefined ? {} : { record }),
    dashboardRuns,
    statsExtra: () => ({ config }),
    onEngineFailure: (error) => {
      // Every held request has already failed and the last step records are in the log.
      if (!f.exitOnEngineFailure) {
        console.error(`headroom: engine failed (${error.message}); /health answers 503 until the process is restarted`);
        return;
      }
      console.error(`headroom: engine failed (${error.message}); exiting with status ${EXIT_CODES.engineFailure}`);
      setTimeout(() => process.exit(EXIT_CODES.engineFailure), 100).unref();
    },
  });
}

/** --record: the directory is created if missing and must be writable, on an ordinary filesystem, else startup fails naming the flag (writable-dir.ts). */
async function recordOption(f: ServeFlags): Promise<{ dir: string; maxSegmentBytes: number; maxSegments: number } | undefined> {
  const maxSegmentBytes = int('record-max-bytes', f.recordMaxBytes);
  if (maxSegmentBytes < MIN_SEGMENT_BYTES) throw new StartupError(`--record-max-bytes: expected at least ${MIN_SEGMENT_BYTES} bytes, got '${f.recordMaxBytes}'`);
  const maxSegments = int('record-max-files', f.recordMaxFiles);
  if (maxSegments < 1) throw new StartupError(`--record-max-files: expected at least 1, got '${f.recordMaxFiles}'`);
  if (f.record === undefined) return undefined;
  const dir = f.record;
  if (dir.trim() === '') throw new StartupError("--record: expected a directory, got ''");
  await prepareWritableDir(dir, '--record: cannot record to');
  return { dir, maxSegmentBytes, maxSegments };
}

async function dashboardRunsOption(dirs: readonly string[]): Promise<string[]> {
  for (const dir of dirs) {
    const ok = await stat(dir).then((s) => s.isDirectory(), () => false);
    if (!ok) throw new StartupError(`--dashboard-runs: no such directory: ${dir}`);
  }
  return [...dirs];
}

async function admissionConfig(f: ServeFlags): Promise<AdmissionConfig> {
  const base = admissionBase(f);
  const modelPath = f.runner === 'mock' ? null : (f.model ?? DEFAULT_MODEL_PATH);
  const modelSha256 = async (): Promise<string> => (modelPath === null ? 'mock' : existsSync(modelPath) ? await fileSha256(modelPath) : 'unknown');
  let state: AdmissionConfig['state'];
  if (f.admissionState !== undefined && f.admission !== 'off') {
    await prepareWritableDir(f.admissionState, '--admission-state: cannot keep state in');
    state = { dir: f.admissionState, runner: f.runner, modelSha256: await modelSha256(), machine: machineIdentity() };
  }
  if (f.admissionArtifact === undefined) {
    if (f.admissionCalibrationTraces !== undefined) throw new StartupError('--admission-calibration-traces: calibrates an --admission-artifact; give one (without it the server learns online)');
    return { ...base, selfTrain: f.admissionSelfTrain === 'on', ...(state === undefined ? {} : { state }) };
  }
  if (!existsSync(f.admissionArtifact)) throw new StartupError(`--admission-artifact: file not found: ${f.admissionArtifact}`);
  if (f.admissionCalibrationTraces !== undefined && !existsSync(f.admissionCalibrationTraces)) throw new StartupError(`--admission-calibration-traces: no such directory: ${f.admissionCalibrationTraces}`);
  // What the artifact must have been fitted on: this runner, this model file, this machine.
  return {
    ...base,
    ...(state === undefined ? {} : { state }),
    artifactPath: f.admissionArtifact,
    expect: { runner: f.runner, modelSha256: state?.modelSha256 ?? (await modelSha256()), machine: machineIdentity() },
    ...(f.admissionCalibrationTraces === undefined ? {} : { calibrationTraces: f.admissionCalibrationTraces }),
  };
}
