// `headroom serve`: run the OpenAI-compatible server in engine mode.
//
// Order: parse flags → listen (a busy port fails here, in milliseconds) → load the model → warm up
// → ready. A startup failure is one line on stderr and exit code 1; the exit codes are listed in
// cli/startup-errors.ts, `serve --help` and the README. SIGTERM/SIGINT drains (exit 0, or 2 when
// the drain deadline cuts requests); a second signal during the drain exits at once (3).

import { existsSync } from 'node:fs';
import type { Command } from 'commander';
import { Option } from 'commander';
import { KeyRing } from '../../api/auth.ts';
import { LOG_FORMATS, LOG_LEVELS, serverConfig } from '../../api/config.ts';
import type { LogFormat, LogLevel } from '../../api/config.ts';
import type { Headroom } from '../../app.ts';
import type { SchedulerName } from '../../engine/scheduler/factory.ts';
import { createRunner } from '../../engine/runner/factory.ts';
import { EXIT_CODES, StartupError, startupErrorLine } from '../startup-errors.ts';
import type { AdmissionConfig } from '../../admission/factory.ts';
import { fileSha256, machineIdentity } from '../../admission/provenance.ts';
import { DEFAULT_MODEL_PATH } from '../../model/default-model.ts';
import type { EffectiveConfig } from '../config.ts';
import { effectiveConfig, originNote } from '../config.ts';
import { debugEnabled } from '../user-error.ts';
import { FlowController } from '../../flow/flow-controller.ts';
import { parseBandShares } from '../../flow/priority.ts';

interface ServeFlags {
  host: string;
  port: string;
  runner: 'llama' | 'mock';
  model?: string;
  threads: string;
  ctx?: string;
  ctxBeyondTrained: boolean;
  parallel: string;
  batchTokens: string;
  scheduler: SchedulerName;
  sloMs: string;
  minSloMs: string;
  maxSloMs: string;
  maxQueued: string;
  maxOutputTokens: string;
  mockSpeed: string;
  kv: 'paged' | 'contiguous';
  prefixCache: 'on' | 'off';
  blockSize: string;
  prefillChunk?: string;
  stepTargetMs: string;
  priority: 'prefill-first' | 'decode-first';
  staticBatch: string;
  staticWaitMs: string;
  cacheMaxFraction: string;
  cacheRetain: 'all' | 'seen';
  kvWatermark: string;
  maxPreemptions: string;
  otelEndpoint?: string;
  metrics: boolean;
  drainTimeoutMs: string;
  headersTimeoutMs: string;
  requestTimeoutMs: string;
  keepAliveTimeoutMs: string;
  maxConnections: string;
  maxConnectionsPerAddress: string;
  bodyLimitBytes: string;
  exitOnEngineFailure: boolean;
  traceOut?: string;
  admission: 'conformal' | 'off';
  admissionGuarantee: string;
  admissionCalibration: 'rolling' | 'aci';
  admissionArtifact?: string;
  admissionCalibrationTraces?: string;
  admissionAllowMismatch: boolean;
  admissionHeadroom: 'on' | 'off';
  admissionHeadroomBatchShare: string;
  admissionHeadroomQueue: 'on' | 'off';
  admissionKeepWarmMs: string;
  logLevel: LogLevel;
  logFormat: LogFormat;
  logPrompts: boolean;
  apiKeyFile?: string;
  corsOrigin: string[];
  servedModelName?: string[];
  protectMetrics: boolean;
  maxInflightRequests: string;
  maxInflightTokens: string;
  maxInflightTotalTokens: string;
  flowQueueSize: string;
  flowQueueTtlMs: string;
  priorityBands: string;
}

const stepTarget = (v: string): number | 'auto' | 'off' => {
  if (v === 'auto' || v === 'off') return v;
  const n = Number(v);
  if (v.trim() === '' || !(n > 0) || !Number.isFinite(n)) throw new StartupError(`--step-target-ms: expected a positive number of ms, 'auto' or 'off', got '${v}'`);
  return n;
};
const int = (name: string, v: string): number => {
  const n = Number(v);
  if (v.trim() === '' || !Number.isInteger(n)) throw new StartupError(`--${name}: expected an integer, got '${v}'`);
  return n;
};

const nonNegative = (name: string, v: string): number => {
  const n = Number(v);
  if (v.trim() === '' || !(n >= 0 && Number.isFinite(n))) throw new StartupError(`--${name}: expected a number ≥ 0, got '${v}'`);
  return n;
};

const share = (name: string, v: string): number => {
  const n = Number(v);
  if (v.trim() === '' || !(n > 0 && n <= 1)) throw new StartupError(`--${name}: expected a number in (0, 1], got '${v}'`);
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
  program
    .command('serve', { isDefault: true })
    .description('serve the OpenAI API on a local model (engine mode)')
    .showHelpAfterError(false)
    .configureOutput({ outputError: (str, write) => write(`headroom: ${str.trimEnd()} (see headroom serve --help)\n`) })
    .addHelpText('after', EXIT_HELP)
    .option('--host <host>', 'interface to listen on', '0.0.0.0')
    .option('--port <port>', 'port to listen on', '8000')
    .addOption(new Option('--runner <runner>', 'model runner').choices(['llama', 'mock']).default('llama'))
    .option('--model <file>', 'GGUF model to serve (default: the generated tiny model)')
    .option('--threads <n>', 'llama.cpp threads', '2')
    .option('--ctx <cells>', "KV cells in the unified pool (default: the model's trained context, at most 8192; mock: 8192)")
    .option('--ctx-beyond-trained', "allow --ctx above the model's trained context (GGUF llama.context_length)", false)
    .option('--parallel <n>', 'sequence ids (most requests running at once)', '16')
    .option('--batch-tokens <n>', 'most tokens in one forward pass; a step in which nothing decodes may fill it (llama.cpp computes it in micro-batches of at most 512)', '2048')
    .addOption(new Option('--scheduler <name>', 'scheduling policy').choices(['fifo', 'static', 'continuous']).default('continuous'))
    .addOption(new Option('--kv <mode>', 'KV accounting').choices(['paged', 'contiguous']).default('paged'))
    .addOption(new Option('--prefix-cache <on|off>', 'radix prefix cache (paged KV only)').choices(['on', 'off']).default('on'))
    .option('--admission-headroom-batch-share <share>', 'the shortcut admits only while the running batch, with the request, fills at most this share of the sequence slots, (0, 1]', '0.25')
    .addOption(new Option('--admission-headroom-queue <on|off>', "the shortcut admits with requests waiting, counting them in the batch and their prompt work in this request's prefill ('off': only with nothing queued)").choices(['on', 'off']).default('on'))
    .option('--admission-keep-warm-ms <ms>', 'decide one made-up request every this many ms so the decision path stays in cache (0: off; measured: decision p99 ≤ 100 µs with it, ≤ 200 µs without)', '20')
    .option('--block-size <tokens>', 'KV block size', '16')
    .option('--cache-max-fraction <f>', 'most of the KV pool idle cached prefixes may keep, (0, 1]', '1')
    .addOption(new Option('--cache-retain <what>', "what the prefix cache keeps of a computed prompt: 'seen' (the part an earlier prompt also had; a retained unique prompt slows every decode) or 'all'").choices(['seen', 'all']).default('seen'))
    .option('--kv-watermark <f>', 'share of KV blocks a new request must leave free while others run (room for their decode growth), [0, 0.5]', '0.01')
    .option('--max-preemptions <n>', 'a request preempted this many times is not preempted again before it finishes', '2')
    .option('--prefill-chunk <tokens>', 'most prompt tokens per step, all requests together (bounds step time and so ITL; rounded so a step has a multiple of 64 rows)', '256')
    .option('--step-target-ms <ms|auto|off>', "experimental: time a prompt chunk may add to a step with decoding requests, a number or 'auto' (twice what a --prefill-chunk chunk adds at the start of a prompt, from a cost model fitted to the steps run); 'off': every step capped at --prefill-chunk tokens", 'off')
    .addOption(new Option('--priority <p>', 'who gets the step budget first').choices(['prefill-first', 'decode-first']).default('decode-first'))
    .option('--static-batch <n>', 'static scheduler: batch size', '8')
    .option('--static-wait-ms <ms>', 'static scheduler: longest wait to fill a batch', '50')
    .option('--slo-ms <ms>', 'default latency budget per request', '10000')
    .option('--min-slo-ms <ms>', 'smallest x-slo-ms a client may ask for (below: 400 at once, never queued)', '100')
    .option('--max-slo-ms <ms>', 'largest x-slo-ms a client may ask for (above: 400)', '3600000')
    .option('--max-queued <n>', 'most requests held in memory', '1024')
    .option('--max-output-tokens <n>', 'largest max_tokens accepted', '1024')
    .option('--body-limit-bytes <n>', 'largest request body (413 above)', String(1 << 20))
    .option('--drain-timeout-ms <ms>', 'drain deadline after SIGTERM/SIGINT: then running streams get an error event and [DONE], and the process exits', '60000')
    .option('--headers-timeout-ms <ms>', 'longest time to receive request headers (408 and close)', '10000')
    .option('--request-timeout-ms <ms>', 'longest time to receive a whole request, body included (408 and close)', '30000')
    .option('--keep-alive-timeout-ms <ms>', 'idle keep-alive connections close after this', '5000')
    .option('--max-connections <n>', 'most open connections (past it only /health and /ready answer); kept below the open-file limit', '1024')
    .option('--max-connections-per-address <n>', 'most open connections from one client address', '256')
    .option('--mock-speed <x>', 'mock runner cost multiplier', '1')
    .option('--otel-endpoint <url>', 'export OpenTelemetry request spans to this OTLP/HTTP collector (off by default)')
    .option('--no-metrics', 'do not serve Prometheus metrics on /metrics')
    .addOption(new Option('--admission <mode>', 'admission control: admit a request only if its calibrated latency bound fits its budget').choices(['conformal', 'off']).default('conformal'))
    .option('--admission-guarantee <p>', 'share of admitted requests promised to finish inside their budget, (0, 1)', '0.95')
    .addOption(new Option('--admission-calibration <mode>', 'online conformal calibration: rolling window or adaptive (ACI)').choices(['rolling', 'aci']).default('rolling'))
    .option('--admission-artifact <file>', 'an offline E2E predictor (headroom admission train); default: an online baseline fitted from outcomes')
    .option('--admission-calibration-traces <dir>', 'warm start: calibrate the artifact on these collected traces from the first request')
    .option('--admission-allow-mismatch', 'use an artifact fitted on another runner, model or machine (warns)', false)
    .addOption(new Option('--admission-headroom <on|off>', 'admit what the bound refuses while the engine visibly has room (nothing queued, a small batch), checked against its own miss rate').choices(['on', 'off']).default('on'))
    .option('--trace-out <file>', 'append one admission-trace JSON line per request (features as admission saw them, then the outcome)')
    .addOption(new Option('--log-level <level>', 'least severe log line written (request lines are info)').choices(LOG_LEVELS).default('info'))
    .addOption(new Option('--log-format <format>', 'log lines as JSON objects or as text').choices(LOG_FORMATS).default('json'))
    .option('--log-prompts', 'put prompt and output text in request log lines (never otherwise)', false)
    .option('--api-key-file <file>', "API keys, one 'key tenant [role]' per line (role user|operator); also HEADROOM_API_KEYS. /health, /ready, /metrics stay open")
    .option('--protect-metrics', 'with API keys, /metrics needs a key too (default: open, like /health and /ready)', false)
    .option('--cors-origin <origin>', 'allow browsers on this origin (scheme://host[:port], or *) to call the API; repeatable', (v: string, prev: string[]) => [...prev, v], [] as string[])
    .option('--served-model-name <names...>', "names the model answers to (requests must use one; /v1/models lists them); default: the model file's stem")
    .option('--max-inflight-requests <n>', 'flow control: most requests in flight (0: unlimited); past it requests wait in the flow queue or get 429', '0')
    .option('--max-inflight-tokens <n>', 'flow control: most prompt tokens of the requests in flight (0: unlimited)', '0')
    .option('--max-inflight-total-tokens <n>', 'flow control: most prompt plus max_tokens × n of the requests in flight (0: unlimited)', '0')
    .option('--flow-queue-size <n>', 'flow control: most requests waiting for a slot, all bands together (0: 429 at once)', '256')
    .option('--flow-queue-ttl-ms <ms>', 'flow control: longest wait for a slot, then 429 with Retry-After', '5000')
    .option('--priority-bands <shares>', "flow control: each priority band's share of the caps and the queue, lowest band first (x-headroom-priority 0..n-1; no header: the top band)", '1')
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

async function build(f: ServeFlags, config: EffectiveConfig): Promise<Headroom> {
  const server = serverConfig({
    host: f.host,
    port: int('port', f.port),
    sloMs: int('slo-ms', f.sloMs),
    minSloMs: int('min-slo-ms', f.minSloMs),
    maxSloMs: int('max-slo-ms', f.maxSloMs),
    maxOutputTokens: int('max-output-tokens', f.maxOutputTokens),
    bodyLimitBytes: int('body-limit-bytes', f.bodyLimitBytes),
    drainTimeoutMs: int('drain-timeout-ms', f.drainTimeoutMs),
    headersTimeoutMs: int('headers-timeout-ms', f.headersTimeoutMs),
    requestTimeoutMs: int('request-timeout-ms', f.requestTimeoutMs),
    keepAliveTimeoutMs: int('keep-alive-timeout-ms', f.keepAliveTimeoutMs),
    maxConnections: int('max-connections', f.maxConnections),
    maxConnectionsPerAddress: int('max-connections-per-address', f.maxConnectionsPerAddress),
    logLevel: f.logLevel,
    logFormat: f.logFormat,
    logPrompts: f.logPrompts,
    corsOrigins: f.corsOrigin,
    servedModelNames: f.servedModelName ?? [],
    protectMetrics: f.protectMetrics,
  });
  const keys = KeyRing.load({ ...(f.apiKeyFile === undefined ? {} : { file: f.apiKeyFile }), ...(process.env.HEADROOM_API_KEYS === undefined ? {} : { env: process.env.HEADROOM_API_KEYS }) });
  if (f.model !== undefined && !existsSync(f.model)) throw new StartupError(`model file not found: ${f.model}`);
  const runnerConfig = {
    runner: f.runner,
    ...(f.model === undefined ? {} : { modelPath: f.model }),
    threads: int('threads', f.threads),
    ...(f.ctx === undefined ? {} : { contextTokens: int('ctx', f.ctx) }),
    contextBeyondTrained: f.ctxBeyondTrained,
    maxSequences: int('parallel', f.parallel),
    maxBatchTokens: int('batch-tokens', f.batchTokens),
    microBatchTokens: Math.min(512, int('batch-tokens', f.batchTokens)),
    mockSpeed: Number(f.mockSpeed),
  };
  const admission = await admissionConfig(f);
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
      priority: f.priority,
      staticBatchSize: int('static-batch', f.staticBatch),
      staticWaitMs: int('static-wait-ms', f.staticWaitMs),
      cacheMaxFraction: Number(f.cacheMaxFraction),
      cacheRetain: f.cacheRetain,
      kvWatermark: Number(f.kvWatermark),
      maxPreemptions: int('max-preemptions', f.maxPreemptions),
    },
    maxQueuedRequests: int('max-queued', f.maxQueued),
    obs: { metrics: f.metrics, ...(f.otelEndpoint === undefined ? {} : { otelEndpoint: f.otelEndpoint }) },
    ...(f.traceOut === undefined ? {} : { traceOut: f.traceOut }),
    admission,
    keys,
    ...flowOption(f),
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

/** Flow control from its flags: absent when no cap is set (nothing to count against). */
function flowOption(f: ServeFlags): { flow?: FlowController } {
  const count = (name: string, v: string): number => {
    const n = int(name, v);
    if (n < 0) throw new StartupError(`--${name}: expected an integer ≥ 0, got '${v}'`);
    return n;
  };
  const cap = (name: string, v: string): number => count(name, v) || Infinity;
  const maxRequests = cap('max-inflight-requests', f.maxInflightRequests);
  const maxInputTokens = cap('max-inflight-tokens', f.maxInflightTokens);
  const maxTotalTokens = cap('max-inflight-total-tokens', f.maxInflightTotalTokens);
  let shares: number[];
  try {
    shares = parseBandShares(f.priorityBands);
    const limits = { maxRequests, maxInputTokens, maxTotalTokens, shares, queueSize: count('flow-queue-size', f.flowQueueSize), queueTtlMs: int('flow-queue-ttl-ms', f.flowQueueTtlMs) };
    const on = maxRequests !== Infinity || maxInputTokens !== Infinity || maxTotalTokens !== Infinity;
    const flow = new FlowController(limits);
    return on || shares.length > 1 ? { flow } : {};
  } catch (err) {
    if (err instanceof StartupError) throw err;
    throw new StartupError((err as Error).message, { cause: err });
  }
}

async function admissionConfig(f: ServeFlags): Promise<AdmissionConfig> {
  const guarantee = Number(f.admissionGuarantee);
  if (!(guarantee > 0 && guarantee < 1)) throw new StartupError(`--admission-guarantee: expected a number in (0, 1), got '${f.admissionGuarantee}'`);
  const base: AdmissionConfig = { mode: f.admission, guarantee, calibration: f.admissionCalibration, allowMismatch: f.admissionAllowMismatch, headroom: f.admissionHeadroom === 'on', headroomBatchShare: share('admission-headroom-batch-share', f.admissionHeadroomBatchShare), headroomQueue: f.admissionHeadroomQueue === 'on', keepWarmMs: nonNegative('admission-keep-warm-ms', f.admissionKeepWarmMs) };
  if (f.admissionArtifact === undefined) return base;
  if (!existsSync(f.admissionArtifact)) throw new StartupError(`admission artifact not found: ${f.admissionArtifact}`);
  // What the artifact must have been fitted on: this runner, this model file, this machine.
  const modelPath = f.runner === 'mock' ? null : (f.model ?? DEFAULT_MODEL_PATH);
  const modelSha256 = modelPath === null ? 'mock' : existsSync(modelPath) ? await fileSha256(modelPath) : 'unknown';
  return {
    ...base,
    artifactPath: f.admissionArtifact,
    expect: { runner: f.runner, modelSha256, machine: machineIdentity() },
    ...(f.admissionCalibrationTraces === undefined ? {} : { calibrationTraces: f.admissionCalibrationTraces }),
  };
}

/** First signal: drain (or exit, if the model is still loading). Second: exit at once. */
function onSignals(headroom: Headroom): void {
  let draining = false;
  const log = headroom.app.log;
  const onSignal = (sig: string): void => {
    if (draining) {
      log.warn(`${sig} again during the drain: exiting now`);
      process.exit(EXIT_CODES.forced);
    }
    draining = true;
    if (!headroom.loaded) {
      log.info(`${sig} while loading the model: exiting`);
      process.exit(EXIT_CODES.drained);
    }
    log.info(`${sig}: draining (no new requests; in-flight ones finish); a second signal exits at once`);
    void headroom.drain().then((outcome) => {
      log.info(`${outcome === 'drained' ? 'drained' : 'drain deadline passed; running requests were ended with an error'}; exiting`);
      process.exit(outcome === 'drained' ? EXIT_CODES.drained : EXIT_CODES.drainDeadline);
    });
  };
  process.on('SIGTERM', () => onSignal('SIGTERM'));
  process.on('SIGINT', () => onSignal('SIGINT'));
}
