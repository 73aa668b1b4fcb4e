// `headroom serve`: run the OpenAI-compatible server in engine mode.
//
// Order: parse flags → listen (a busy port fails here, in milliseconds) → load the model → warm up
// → ready. A startup failure is one line on stderr and exit code 1; the exit codes are listed in
// cli/startup-errors.ts, `serve --help` and docs/serving.md. SIGTERM/SIGINT drains (exit 0, or 2 when
// the drain deadline cuts requests); a second signal during the drain exits at once (3).

import { existsSync } from 'node:fs';
import type { Command } from 'commander';
import type { Headroom } from '../../app.ts';
import { createRunner } from '../../engine/runner/factory.ts';
import { EXIT_CODES, StartupError, startupErrorLine } from '../startup-errors.ts';
import type { AdmissionConfig } from '../../admission/factory.ts';
import { fileSha256, machineIdentity } from '../../admission/provenance.ts';
import { DEFAULT_MODEL_PATH } from '../../model/default-model.ts';
import type { EffectiveConfig } from '../config.ts';
import { effectiveConfig, originNote } from '../config.ts';
import { addOptions, readOptions } from '../option-table.ts';
import { debugEnabled } from '../user-error.ts';
import { defaultAdmissionStateDir } from '../state-home.ts';
import { prepareWritableDir } from '../writable-dir.ts';
import { checkTraceOut, flowOption, keysOf, onSignals, otelEndpointOf, serverConfigOf } from './front-door.ts';
import { admissionBase } from './admission-options.ts';
import { SERVE_OPTIONS } from './serve-options.ts';
import type { ServeOptions } from './serve-options.ts';

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
  addOptions(cmd, SERVE_OPTIONS, 'at-start').action(async (_flags: unknown, cmd: Command) => {
    // The port as given, for the line that says it is busy.
    const where = { host: String(cmd.getOptionValue('host')), port: Number(cmd.getOptionValue('port')) };
    let headroom: Headroom;
    try {
      const f = readOptions(cmd, SERVE_OPTIONS);
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

/** Overlapped dispatch hands a step's tokens out while the next step computes: an inline step would hold them a whole step. */
function inlineStepMs(f: ServeOptions): number {
  const overlap = f.overlapDispatch === 'on';
  if (f.inlineStepMs === undefined) return overlap ? 0 : DEFAULT_INLINE_STEP_MS;
  const ms = f.inlineStepMs;
  if (ms > 0 && overlap) throw new StartupError(`--inline-step-ms ${f.inlineStepMs} with --overlap-dispatch on: a step run on the event-loop thread leaves no time to overlap; pass --inline-step-ms 0`);
  return ms;
}

/** Steps up to this long run inline by default: a decode step of the tiny or small model (docs/per-token.md §10). */
const DEFAULT_INLINE_STEP_MS = 5;

async function build(f: ServeOptions, config: EffectiveConfig): Promise<Headroom> {
  const server = serverConfigOf(f, { servedModelNames: f.servedModelName });
  const keys = keysOf(f);
  const runnerConfig = {
    runner: f.runner,
    ...(f.model === undefined ? {} : { modelPath: f.model }),
    threads: f.threads,
    inlineStepMs: inlineStepMs(f),
    pinThreads: f.pinThreads === 'on',
    splitSteps: f.splitSteps === 'on',
    ...(f.ctx === undefined ? {} : { contextTokens: f.ctx }),
    contextBeyondTrained: f.ctxBeyondTrained,
    maxSequences: f.parallel,
    maxBatchTokens: f.batchTokens,
    microBatchTokens: Math.min(512, f.batchTokens),
    mockSpeed: f.mockSpeed,
    ...(f.chatTemplate === undefined ? {} : { chatTemplate: f.chatTemplate }),
    parseSpecialInMessages: f.specialInMessages,
    promptSpecialAsText: f.promptSpecial === 'text',
  };
  const admission = await admissionConfig(f);
  await checkTraceOut(f.traceOut);
  const record = await recordOption(f);
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
      blockSize: f.blockSize,
      prefillChunkTokens: f.prefillChunk,
      stepTarget: f.stepTargetMs,
      stepMinChunkTokens: f.stepMinChunk,
      priority: f.priority,
      staticBatchSize: f.staticBatch,
      staticWaitMs: f.staticWaitMs,
      ...(f.cacheMaxFraction === 'auto' ? {} : { cacheMaxFraction: f.cacheMaxFraction }),
      cacheRetain: f.cacheRetain,
      hostTierTokens: f.cacheHostTokens,
      kvWatermark: f.kvWatermark,
      maxPreemptions: f.maxPreemptions,
    },
    maxQueuedRequests: f.maxQueued,
    overlapDispatch: f.overlapDispatch === 'on',
    obs: { metrics: f.metrics, ...otelEndpointOf(f) },
    ...(f.traceOut === undefined ? {} : { traceOut: f.traceOut }),
    admission,
    keys,
    ...flowOption(f),
    ...(record === undefined ? {} : { record }),
    dashboardRuns: f.dashboardRuns,
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
async function recordOption(f: ServeOptions): Promise<{ dir: string; maxSegmentBytes: number; maxSegments: number } | undefined> {
  if (f.record === undefined) return undefined;
  await prepareWritableDir(f.record, '--record: cannot record to');
  return { dir: f.record, maxSegmentBytes: f.recordMaxBytes, maxSegments: f.recordMaxFiles };
}

/**
 * --admission-state: the directory given (created if missing, else startup fails naming the flag),
 * none with 'off', or by default one per listening address under the user's state directory
 * (state-home.ts; none on port 0). A default that cannot be written is one log line, not a failure:
 * the server then learns from scratch, as with 'off'.
 */
async function admissionStateDir(f: ServeOptions): Promise<string | null> {
  if (f.admissionState === 'off') return null;
  if (f.admissionState !== undefined) {
    await prepareWritableDir(f.admissionState, '--admission-state: cannot keep state in');
    return f.admissionState;
  }
  const dir = defaultAdmissionStateDir(f.host, f.port);
  if (dir === null) return null;
  try {
    await prepareWritableDir(dir, 'cannot keep admission state in');
    return dir;
  } catch (err) {
    console.error(`headroom: admission state: not kept (${(err as Error).message}); pass --admission-state DIR, or off`);
    return null;
  }
}

async function admissionConfig(f: ServeOptions): Promise<AdmissionConfig> {
  const base = admissionBase(f);
  const modelPath = f.runner === 'mock' ? null : (f.model ?? DEFAULT_MODEL_PATH);
  const modelSha256 = async (): Promise<string> => (modelPath === null ? 'mock' : existsSync(modelPath) ? await fileSha256(modelPath) : 'unknown');
  let state: AdmissionConfig['state'];
  const stateDir = f.admission === 'off' ? null : await admissionStateDir(f);
  if (stateDir !== null) state = { dir: stateDir, runner: f.runner, modelSha256: await modelSha256(), machine: machineIdentity() };
  if (f.admissionArtifact === undefined) {
    if (f.admissionCalibrationTraces !== undefined) throw new StartupError('--admission-calibration-traces: calibrates an --admission-artifact; give one (without it the server learns online)');
    return { ...base, selfTrain: f.admissionSelfTrain === 'on', ...(state === undefined ? {} : { state }) };
  }
  // What the artifact must have been fitted on: this runner, this model file, this machine.
  return {
    ...base,
    ...(state === undefined ? {} : { state }),
    artifactPath: f.admissionArtifact,
    expect: { runner: f.runner, modelSha256: state?.modelSha256 ?? (await modelSha256()), machine: machineIdentity() },
    ...(f.admissionCalibrationTraces === undefined ? {} : { calibrationTraces: f.admissionCalibrationTraces }),
  };
}
