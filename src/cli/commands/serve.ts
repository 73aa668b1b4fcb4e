// `headroom serve`: run the OpenAI-compatible server in engine mode.

import type { Command } from 'commander';
import { Option } from 'commander';
import { serverConfig } from '../../api/config.ts';
import { Headroom } from '../../app.ts';
import type { SchedulerName } from '../../engine/scheduler/factory.ts';
import { createRunner } from '../../engine/runner/factory.ts';
import type { Runner } from '../../engine/runner/runner.ts';
import { fileSha256, machineIdentity } from '../../admission/provenance.ts';

interface ServeFlags {
  host: string;
  port: string;
  runner: 'llama' | 'mock';
  model?: string;
  threads: string;
  ctx: string;
  parallel: string;
  batchTokens: string;
  scheduler: SchedulerName;
  sloMs: string;
  maxQueued: string;
  maxOutputTokens: string;
  mockSpeed: string;
  kv: 'paged' | 'contiguous';
  prefixCache: 'on' | 'off';
  blockSize: string;
  prefillChunk?: string;
  priority: 'prefill-first' | 'decode-first';
  staticBatch: string;
  staticWaitMs: string;
  cacheMaxFraction: string;
  otelEndpoint?: string;
  metrics: boolean;
  exitOnEngineFailure: boolean;
  traceOut?: string;
  admission: 'conformal' | 'off';
  admissionGuarantee: string;
  admissionCalibration: 'rolling' | 'aci';
  admissionArtifact?: string;
  admissionAllowMismatch: boolean;
}

/** Exit status when the engine's step loop fails (a bug): a supervisor should restart the process. */
export const EXIT_ENGINE_FAILURE = 70;

/** What an admission artifact must have been fitted on to be trusted here. */
async function runnerIdentity(runner: Runner): Promise<{ runner: string; modelSha256: string; machine: string }> {
  const path = runner.info.details['modelPath'];
  const modelSha256 = typeof path === 'string' ? await fileSha256(path) : `mock:${JSON.stringify(runner.info.details)}`;
  return { runner: runner.info.name, modelSha256, machine: machineIdentity() };
}

const int = (name: string, v: string): number => {
  const n = Number(v);
  if (!Number.isInteger(n)) throw new Error(`--${name}: expected an integer, got '${v}'`);
  return n;
};

export function registerServeCommand(program: Command): void {
  program
    .command('serve', { isDefault: true })
    .description('serve the OpenAI API on a local model (engine mode)')
    .option('--host <host>', 'interface to listen on', '0.0.0.0')
    .option('--port <port>', 'port to listen on', '8000')
    .addOption(new Option('--runner <runner>', 'model runner').choices(['llama', 'mock']).default('llama'))
    .option('--model <file>', 'GGUF model to serve (default: the generated tiny model)')
    .option('--threads <n>', 'llama.cpp threads', '2')
    .option('--ctx <cells>', 'KV cells in the unified pool', '8192')
    .option('--parallel <n>', 'sequence ids (most requests running at once)', '16')
    .option('--batch-tokens <n>', 'most tokens in one forward pass', '512')
    .addOption(new Option('--scheduler <name>', 'scheduling policy').choices(['fifo', 'static', 'continuous']).default('continuous'))
    .addOption(new Option('--kv <mode>', 'KV accounting').choices(['paged', 'contiguous']).default('paged'))
    .addOption(new Option('--prefix-cache <on|off>', 'radix prefix cache (paged KV only)').choices(['on', 'off']).default('on'))
    .option('--block-size <tokens>', 'KV block size', '16')
    .option('--cache-max-fraction <f>', 'most of the KV pool idle cached prefixes may keep, (0, 1]', '1')
    .option('--prefill-chunk <tokens>', 'most prompt tokens per step, all requests together (bounds step time and so ITL)', '256')
    .addOption(new Option('--priority <p>', 'who gets the step budget first').choices(['prefill-first', 'decode-first']).default('decode-first'))
    .option('--static-batch <n>', 'static scheduler: batch size', '8')
    .option('--static-wait-ms <ms>', 'static scheduler: longest wait to fill a batch', '50')
    .option('--slo-ms <ms>', 'default latency budget per request', '10000')
    .option('--max-queued <n>', 'most requests held in memory', '1024')
    .option('--max-output-tokens <n>', 'largest max_tokens accepted', '1024')
    .option('--mock-speed <x>', 'mock runner cost multiplier', '1')
    .option('--otel-endpoint <url>', 'export OpenTelemetry request spans to this OTLP/HTTP collector (off by default)')
    .option('--no-metrics', 'do not serve Prometheus metrics on /metrics')
    .addOption(new Option('--admission <mode>', 'admission control: admit a request only if its calibrated latency bound fits its budget').choices(['conformal', 'off']).default('conformal'))
    .option('--admission-guarantee <p>', 'share of admitted requests promised to finish inside their budget, (0, 1)', '0.95')
    .addOption(new Option('--admission-calibration <mode>', 'online conformal calibration: rolling window or adaptive (ACI)').choices(['rolling', 'aci']).default('rolling'))
    .option('--admission-artifact <file>', 'an offline E2E predictor (headroom admission train); default: an online baseline fitted from outcomes')
    .option('--admission-allow-mismatch', 'use an artifact fitted on another runner, model or machine (warns)', false)
    .option('--trace-out <file>', 'append one admission-trace JSON line per request (features as admission saw them, then the outcome)')
    .option('--no-exit-on-engine-failure', `stay up with /health at 503 when the engine fails, instead of exiting with status ${EXIT_ENGINE_FAILURE}`)
    .action(async (f: ServeFlags) => {
      const runner = await createRunner({
        runner: f.runner,
        ...(f.model === undefined ? {} : { modelPath: f.model }),
        threads: int('threads', f.threads),
        contextTokens: int('ctx', f.ctx),
        maxSequences: int('parallel', f.parallel),
        maxBatchTokens: int('batch-tokens', f.batchTokens),
        mockSpeed: Number(f.mockSpeed),
      });
      const headroom = new Headroom({
        runner,
        server: serverConfig({ host: f.host, port: int('port', f.port), sloMs: int('slo-ms', f.sloMs), maxOutputTokens: int('max-output-tokens', f.maxOutputTokens) }),
        scheduler: {
          scheduler: f.scheduler,
          kv: f.kv,
          prefixCache: f.kv === 'paged' && f.prefixCache === 'on',
          blockSize: int('block-size', f.blockSize),
          ...(f.prefillChunk === undefined ? {} : { prefillChunkTokens: int('prefill-chunk', f.prefillChunk) }),
          priority: f.priority,
          staticBatchSize: int('static-batch', f.staticBatch),
          staticWaitMs: int('static-wait-ms', f.staticWaitMs),
          cacheMaxFraction: Number(f.cacheMaxFraction),
        },
        maxQueuedRequests: int('max-queued', f.maxQueued),
        obs: { metrics: f.metrics, ...(f.otelEndpoint === undefined ? {} : { otelEndpoint: f.otelEndpoint }) },
        ...(f.traceOut === undefined ? {} : { traceOut: f.traceOut }),
        admission: {
          mode: f.admission,
          guarantee: Number(f.admissionGuarantee),
          calibration: f.admissionCalibration,
          allowMismatch: f.admissionAllowMismatch,
          ...(f.admissionArtifact === undefined ? {} : { artifactPath: f.admissionArtifact, expect: await runnerIdentity(runner) }),
        },
        onEngineFailure: (error) => {
          // Every held request has already failed and the last step records are in the log.
          if (!f.exitOnEngineFailure) {
            console.error(`headroom: engine failed (${error.message}); /health answers 503 until the process is restarted`);
            return;
          }
          console.error(`headroom: engine failed (${error.message}); exiting with status ${EXIT_ENGINE_FAILURE}`);
          setTimeout(() => process.exit(EXIT_ENGINE_FAILURE), 100).unref();
        },
      });
      const address = await headroom.start();
      console.log(`headroom: serving ${runner.info.modelId} with the ${runner.info.name} runner and the ${f.scheduler} scheduler on ${address}`);
      let draining = false;
      const onSignal = (sig: string): void => {
        if (draining) return;
        draining = true;
        console.log(`headroom: ${sig}: draining (no new requests; in-flight ones finish)`);
        void headroom.drain().then((outcome) => {
          console.log(`headroom: ${outcome === 'drained' ? 'drained' : 'drain timed out'}; exiting`);
          process.exit(outcome === 'drained' ? 0 : 1);
        });
      };
      process.on('SIGTERM', () => onSignal('SIGTERM'));
      process.on('SIGINT', () => onSignal('SIGINT'));
    });
}
