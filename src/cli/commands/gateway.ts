// `headroom gateway --upstream URL [--upstream URL ...]`: the same OpenAI front door in front of
// upstream OpenAI-compatible servers (vLLM, SGLang, llama-server, other Headroom servers) instead of
// a local model. Options as `serve` reads them (flag > HEADROOM_GATEWAY_<FLAG> > --config file >
// default; in a file, `upstream:` takes a list); the serving ones are shared (front-door.ts).
//
// Order: parse flags → listen (a busy port fails here) → probe the upstreams → ready once one is
// healthy. Signals and exit codes as `serve`: SIGTERM/SIGINT drains (0, or 2 past the deadline).

import { existsSync } from 'node:fs';
import type { Command } from 'commander';
import { Option } from 'commander';
import type { Gateway } from '../../gateway.ts';
import { EXIT_CODES, StartupError, startupErrorLine } from '../startup-errors.ts';
import { effectiveConfig, originNote } from '../config.ts';
import { debugEnabled } from '../user-error.ts';
import { addFlowOptions, addServerOptions, checkTraceOut, flowOption, int, keysOf, nonNegativeInt, number, onSignals, otelEndpointOf, serverConfigOf } from './front-door.ts';
import type { FlowFlags, ServerFlags } from './front-door.ts';
import { addAdmissionOptions, admissionBase } from './admission-options.ts';
import type { AdmissionFlags } from './admission-options.ts';
import type { EffectiveConfig } from '../config.ts';
import type { AdmissionConfig } from '../../admission/factory.ts';
import { GATEWAY_MODEL_SHA } from '../../admission/provenance.ts';
import { DEFAULT_FIRST_BYTE_TIMEOUT_MS, DEFAULT_IDLE_TIMEOUT_MS, DEFAULT_MAX_EVENT_BYTES, DEFAULT_MAX_METRICS_BYTES } from '../../proxy/upstream-limits.ts';

interface GatewayFlags extends ServerFlags, FlowFlags, AdmissionFlags {
  upstream: string[];
  upstreamSlots: string;
  healthIntervalMs: string;
  scrapeIntervalMs: string;
  probeTimeoutMs: string;
  ejectAfter: string;
  scrapeMetrics: 'on' | 'off';
  metricsStaleMs: string;
  maxAttempts: string;
  connectTimeoutMs: string;
  upstreamTimeoutMs: string;
  upstreamFirstByteTimeoutMs: string;
  upstreamIdleTimeoutMs: string;
  upstreamMaxEventBytes: string;
  metricsMaxBytes: string;
  prefixWeight: string;
  queueWeight: string;
  kvWeight: string;
  saturationQueue: string;
  saturationKv: string;
  upstreamMaxInflight: string;
  affinityUnitBytes: string;
  affinityCapacityBytes: string;
  upstreamApiKey?: string;
  upstreamApiKeysFile?: string;
  upstreamCa?: string;
  upstreamCert?: string;
  upstreamKey?: string;
  upstreamTlsVerify: 'on' | 'off';
}

const positiveInt = (name: string, v: string): number => {
  const n = int(name, v);
  if (n < 1) throw new StartupError(`--${name}: expected an integer ≥ 1, got '${v}'`);
  return n;
};

export function registerGatewayCommand(program: Command): void {
  const cmd = program
    .command('gateway')
    .description('serve the OpenAI API in front of upstream OpenAI-compatible servers (gateway mode)')
    .option('--upstream <url>', 'an upstream server (http://host:port, with or without /v1); repeatable, at least one', (v: string, prev: string[]) => [...prev, v], [] as string[])
    .option('--health-interval-ms <ms>', 'probe every upstream (GET /health) this often', '1000')
    .option('--probe-timeout-ms <ms>', 'a probe or metrics scrape taking longer fails', '2000')
    .option('--eject-after <n>', 'failed probes in a row that eject an upstream (a request that cannot reach it ejects it at once), and upstream errors in a row (bad answers) that degrade it', '2')
    .addOption(new Option('--scrape-metrics <on|off>', "read each upstream's /metrics (queue depth, KV use: vLLM, SGLang, llama-server and Headroom names); off: the picker sees only the gateway's own in-flight counts").choices(['on', 'off']).default('on'))
    .option('--scrape-interval-ms <ms>', "read each upstream's /metrics this often", '500')
    .option('--metrics-stale-ms <ms>', 'scraped load older than this counts as saturation', '5000')
    .option('--max-attempts <n>', 'most upstreams one request is tried on before its first byte', '3')
    .option('--connect-timeout-ms <ms>', 'connecting to an upstream taking longer fails over', '2000')
    .option('--upstream-timeout-ms <ms>', "longest wait for the headers of an upstream's answer that is not streamed (it is generated whole first)", '300000')
    .option('--upstream-first-byte-timeout-ms <ms>', "longest wait for a stream's headers and first event; past it the upstream is degraded and the request fails over", String(DEFAULT_FIRST_BYTE_TIMEOUT_MS))
    .option('--upstream-idle-timeout-ms <ms>', "longest silence inside an upstream's body once its headers are in; past it the upstream is degraded (failover before the first byte, an error event after)", String(DEFAULT_IDLE_TIMEOUT_MS))
    .option('--upstream-max-event-bytes <n>', "largest single event of an upstream's stream; a longer one is an upstream error", String(DEFAULT_MAX_EVENT_BYTES))
    .option('--metrics-max-bytes <n>', "largest /metrics body read from an upstream; a longer one fails the scrape", String(DEFAULT_MAX_METRICS_BYTES))
    .option('--prefix-weight <w>', 'picker: weight of prefix affinity (share of the prompt the upstream probably has cached)', '2')
    .option('--queue-weight <w>', 'picker: weight of a short queue (scraped queue plus the gateway\'s in-flight requests)', '1')
    .option('--kv-weight <w>', 'picker: weight of free KV cache', '1')
    .option('--saturation-queue <n>', 'picker: an upstream with this many queued requests (scraped) is saturated: no affinity sends it more', '5')
    .option('--saturation-kv <f>', 'picker: an upstream with this share of its KV cache in use is saturated, (0, 1]', '0.9')
    .option('--upstream-slots <n>', "sequence slots of each upstream, for admission control's view of free slots (0: what each reports — llama-server's /props total_slots — or unknown)", '0')
    .option('--upstream-max-inflight <n>', "picker: an upstream holding this many of the gateway's requests is saturated (0: no such bound)", '0')
    .option('--affinity-unit-bytes <n>', 'prefix affinity: prompts are matched in units of this many bytes', '16')
    .option('--upstream-api-key <key>', 'sent to every upstream as Authorization: Bearer (prefer the environment variable HEADROOM_GATEWAY_UPSTREAM_API_KEY: a flag shows in the process list)')
    .option('--upstream-api-keys-file <file>', "one 'URL KEY' per line: that upstream's own key, sent instead of --upstream-api-key (each URL one of --upstream)")
    .option('--upstream-ca <file>', 'PEM CA certificates to trust for https upstreams, besides the system\'s')
    .option('--upstream-cert <file>', 'PEM client certificate for upstreams that ask for one (mutual TLS); with --upstream-key')
    .option('--upstream-key <file>', 'PEM private key of --upstream-cert')
    .addOption(new Option('--upstream-tls-verify <on|off>', 'verify https upstreams\' certificates (off: accept any; a warning at start)').choices(['on', 'off']).default('on'))
    .option('--affinity-capacity-bytes <n>', 'prefix affinity: most prompt bytes remembered per upstream (least recently used go first)', String(16 << 20));
  addServerOptions(cmd);
  addAdmissionOptions(cmd, 'off');
  addFlowOptions(cmd).action(async (f: GatewayFlags, c: Command) => {
    const where = { host: f.host, port: Number(f.port) };
    let gateway: Gateway;
    try {
      gateway = await build(f, effectiveConfig(c));
      await gateway.listen();
      onSignals({ app: gateway.app, get loaded() { return gateway.lifecycle.warm; }, drain: () => gateway.drain() }, 'a healthy upstream');
      await gateway.backend.pool.start();
    } catch (err) {
      const line = startupErrorLine(err, where);
      console.error(`headroom: error: ${line}${originNote(c, line)}`);
      if (debugEnabled() && err instanceof Error) console.error(err.stack);
      process.exit(EXIT_CODES.startupFailure);
    }
  });
}

async function build(f: GatewayFlags, config: EffectiveConfig): Promise<Gateway> {
  if (f.upstream.length === 0) throw new StartupError('--upstream: give at least one upstream server URL (repeatable), or `upstream:` as a list in --config');
  const { normalizeUpstreamUrl } = await import('../../proxy/upstream.ts');
  const upstreams = f.upstream.map((u) => {
    try {
      return normalizeUpstreamUrl(u);
    } catch (err) {
      throw new StartupError(`--upstream: ${(err as Error).message}`, { cause: err });
    }
  });
  const weight = (name: string, v: string): number => number(name, v, (n) => n >= 0, 'a number ≥ 0');
  const maxInFlight = nonNegativeInt('upstream-max-inflight', f.upstreamMaxInflight);
  const slots = nonNegativeInt('upstream-slots', f.upstreamSlots);
  const unit = positiveInt('affinity-unit-bytes', f.affinityUnitBytes);
  const capacity = positiveInt('affinity-capacity-bytes', f.affinityCapacityBytes);
  if (capacity < unit) throw new StartupError(`--affinity-capacity-bytes: expected at least --affinity-unit-bytes (${unit}), got '${f.affinityCapacityBytes}'`);
  const { loadUpstreamAccess } = await import('../../proxy/upstream-access.ts');
  let access;
  try {
    access = loadUpstreamAccess({ apiKey: f.upstreamApiKey, apiKeysFile: f.upstreamApiKeysFile, upstreams, caFile: f.upstreamCa, certFile: f.upstreamCert, keyFile: f.upstreamKey, verify: f.upstreamTlsVerify === 'on' });
  } catch (err) {
    throw new StartupError((err as Error).message, { cause: err });
  }
  if (!access.verify) console.error("headroom: warning: --upstream-tls-verify off: https upstreams' certificates are not checked; anyone on the path can read and answer the gateway's requests");
  await checkTraceOut(f.traceOut);
  const options = {
    upstreams: f.upstream,
    access,
    server: serverConfigOf(f),
    pool: {
      healthIntervalMs: positiveInt('health-interval-ms', f.healthIntervalMs),
      scrapeIntervalMs: positiveInt('scrape-interval-ms', f.scrapeIntervalMs),
      probeTimeoutMs: positiveInt('probe-timeout-ms', f.probeTimeoutMs),
      ejectAfterFailures: positiveInt('eject-after', f.ejectAfter),
      scrapeMetrics: f.scrapeMetrics === 'on',
      maxMetricsBytes: positiveInt('metrics-max-bytes', f.metricsMaxBytes),
      affinityUnit: unit,
      affinityCapacity: capacity,
      slotsPerUpstream: slots,
    },
    picker: {
      prefixWeight: weight('prefix-weight', f.prefixWeight),
      queueWeight: weight('queue-weight', f.queueWeight),
      kvWeight: weight('kv-weight', f.kvWeight),
      saturationQueue: positiveInt('saturation-queue', f.saturationQueue),
      saturationKv: number('saturation-kv', f.saturationKv, (n) => n > 0 && n <= 1, 'a number in (0, 1]'),
      maxInFlight: maxInFlight === 0 ? Infinity : maxInFlight,
      staleMs: positiveInt('metrics-stale-ms', f.metricsStaleMs),
    },
    proxy: {
      maxAttempts: positiveInt('max-attempts', f.maxAttempts),
      connectTimeoutMs: positiveInt('connect-timeout-ms', f.connectTimeoutMs),
      upstreamTimeoutMs: positiveInt('upstream-timeout-ms', f.upstreamTimeoutMs),
      firstByteTimeoutMs: positiveInt('upstream-first-byte-timeout-ms', f.upstreamFirstByteTimeoutMs),
      idleTimeoutMs: positiveInt('upstream-idle-timeout-ms', f.upstreamIdleTimeoutMs),
      maxEventBytes: positiveInt('upstream-max-event-bytes', f.upstreamMaxEventBytes),
    },
    obs: { metrics: f.metrics, ...otelEndpointOf(f) },
    keys: keysOf(f),
    ...flowOption(f),
    admission: await admissionConfig(f),
    ...(f.traceOut === undefined ? {} : { traceOut: f.traceOut }),
    statsExtra: () => ({ config }),
  };
  // Imported here, after the flags are checked: `--help` and a bad flag never load the server.
  const { Gateway } = await import('../../gateway.ts');
  return new Gateway(options);
}

/**
 * Admission in gateway mode. An artifact must have been trained on traces a gateway collected on
 * this machine (`headroom admission train --runner gateway`); which upstream model served them is
 * not checked (the gateway learns its upstreams' models only after they answer).
 */
async function admissionConfig(f: GatewayFlags): Promise<AdmissionConfig> {
  const base = admissionBase(f);
  if (f.admissionArtifact === undefined) {
    if (f.admissionCalibrationTraces !== undefined) throw new StartupError('--admission-calibration-traces: needs --admission-artifact (the online baseline has no predictions for them)');
    return base;
  }
  if (!existsSync(f.admissionArtifact)) throw new StartupError(`--admission-artifact: file not found: ${f.admissionArtifact}`);
  if (f.admissionCalibrationTraces !== undefined && !existsSync(f.admissionCalibrationTraces)) throw new StartupError(`--admission-calibration-traces: not found: ${f.admissionCalibrationTraces}`);
  const { machineIdentity } = await import('../../admission/provenance.ts');
  return {
    ...base,
    artifactPath: f.admissionArtifact,
    expect: { runner: 'gateway', modelSha256: GATEWAY_MODEL_SHA, machine: machineIdentity() },
    ...(f.admissionCalibrationTraces === undefined ? {} : { calibrationTraces: f.admissionCalibrationTraces }),
  };
}
