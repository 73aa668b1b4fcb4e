// `headroom gateway --upstream URL [--upstream URL ...]`: the same OpenAI front door in front of
// upstream OpenAI-compatible servers (vLLM, SGLang, llama-server, other Headroom servers) instead of
// a local model. Options as `serve` reads them (flag > HEADROOM_GATEWAY_<FLAG> > --config file >
// default; in a file, `upstream:` takes a list), declared in gateway-options.ts; the serving ones are
// shared with `serve` (front-door-options.ts, front-door.ts).
//
// Order: parse flags → listen (a busy port fails here) → probe the upstreams → ready once one is
// healthy. Signals and exit codes as `serve`: SIGTERM/SIGINT drains (0, or 2 past the deadline).

import type { Command } from 'commander';
import type { Gateway } from '../../gateway.ts';
import { EXIT_CODES, StartupError, startupErrorLine } from '../startup-errors.ts';
import { effectiveConfig, originNote } from '../config.ts';
import type { EffectiveConfig } from '../config.ts';
import { addOptions, readOptions } from '../option-table.ts';
import { debugEnabled } from '../user-error.ts';
import { checkTraceOut, flowOption, keysOf, onSignals, otelEndpointOf, serverConfigOf } from './front-door.ts';
import { admissionBase } from './admission-options.ts';
import { GATEWAY_OPTIONS } from './gateway-options.ts';
import type { GatewayOptions } from './gateway-options.ts';
import type { AdmissionConfig } from '../../admission/factory.ts';
import { GATEWAY_MODEL_SHA } from '../../admission/provenance.ts';
import { normalizeUpstreamUrl } from '../../proxy/upstream.ts';

export function registerGatewayCommand(program: Command): void {
  const cmd = program.command('gateway').description('serve the OpenAI API in front of upstream OpenAI-compatible servers (gateway mode)');
  addOptions(cmd, GATEWAY_OPTIONS, 'at-start').action(async (_flags: unknown, c: Command) => {
    // The port as given, for the line that says it is busy.
    const where = { host: String(c.getOptionValue('host')), port: Number(c.getOptionValue('port')) };
    let gateway: Gateway;
    try {
      gateway = await build(readOptions(c, GATEWAY_OPTIONS), effectiveConfig(c));
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

async function build(f: GatewayOptions, config: EffectiveConfig): Promise<Gateway> {
  if (f.upstream.length === 0) throw new StartupError('--upstream: give at least one upstream server URL (repeatable), or `upstream:` as a list in --config');
  const upstreams = f.upstream.map(normalizeUpstreamUrl);
  if (f.affinityCapacityBytes < f.affinityUnitBytes) throw new StartupError(`--affinity-capacity-bytes: expected at least --affinity-unit-bytes (${f.affinityUnitBytes}), got '${f.affinityCapacityBytes}'`);
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
      healthIntervalMs: f.healthIntervalMs,
      scrapeIntervalMs: f.scrapeIntervalMs,
      probeTimeoutMs: f.probeTimeoutMs,
      ejectAfterFailures: f.ejectAfter,
      scrapeMetrics: f.scrapeMetrics === 'on',
      maxMetricsBytes: f.metricsMaxBytes,
      affinityUnit: f.affinityUnitBytes,
      affinityCapacity: f.affinityCapacityBytes,
      slotsPerUpstream: f.upstreamSlots,
    },
    picker: {
      prefixWeight: f.prefixWeight,
      queueWeight: f.queueWeight,
      kvWeight: f.kvWeight,
      saturationQueue: f.saturationQueue,
      saturationKv: f.saturationKv,
      maxInFlight: f.upstreamMaxInflight === 0 ? Infinity : f.upstreamMaxInflight,
      staleMs: f.metricsStaleMs,
    },
    proxy: {
      maxAttempts: f.maxAttempts,
      connectTimeoutMs: f.connectTimeoutMs,
      upstreamTimeoutMs: f.upstreamTimeoutMs,
      firstByteTimeoutMs: f.upstreamFirstByteTimeoutMs,
      idleTimeoutMs: f.upstreamIdleTimeoutMs,
      maxEventBytes: f.upstreamMaxEventBytes,
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
async function admissionConfig(f: GatewayOptions): Promise<AdmissionConfig> {
  const base = admissionBase(f);
  if (f.admissionArtifact === undefined) {
    if (f.admissionCalibrationTraces !== undefined) throw new StartupError('--admission-calibration-traces: needs --admission-artifact (the online baseline has no predictions for them)');
    return base;
  }
  const { machineIdentity } = await import('../../admission/provenance.ts');
  return {
    ...base,
    artifactPath: f.admissionArtifact,
    expect: { runner: 'gateway', modelSha256: GATEWAY_MODEL_SHA, machine: machineIdentity() },
    ...(f.admissionCalibrationTraces === undefined ? {} : { calibrationTraces: f.admissionCalibrationTraces }),
  };
}
