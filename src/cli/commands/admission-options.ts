// The admission-control flags both serving commands read the same way: `serve` decides on its
// engine's snapshot, `gateway` on its books of what is in flight upstream (proxy/gateway-load.ts).
// The defaults differ in one place only: admission is on by default in engine mode and off in
// gateway mode (there it needs traces collected in front of the upstreams to be more than cautious;
// docs/gateway.md).

import type { Command } from 'commander';
import { Option } from 'commander';
import type { AdmissionConfig } from '../../admission/factory.ts';
import { StartupError } from '../startup-errors.ts';

export interface AdmissionFlags {
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
}

export function addAdmissionOptions(cmd: Command, defaultMode: 'conformal' | 'off'): Command {
  return cmd
    .addOption(new Option('--admission <mode>', 'admission control: admit a request only if its calibrated latency bound fits its budget').choices(['conformal', 'off']).default(defaultMode))
    .option('--admission-guarantee <p>', 'share of admitted requests promised to finish inside their budget, (0, 1)', '0.95')
    .addOption(new Option('--admission-calibration <mode>', 'online conformal calibration: rolling window or adaptive (ACI)').choices(['rolling', 'aci']).default('rolling'))
    .option('--admission-artifact <file>', 'an offline E2E predictor (headroom admission train); default: an online baseline fitted from outcomes')
    .option('--admission-calibration-traces <dir>', 'warm start: calibrate the artifact on these collected traces from the first request')
    .option('--admission-allow-mismatch', 'use an artifact fitted on another runner, model or machine (warns)', false)
    .addOption(new Option('--admission-headroom <on|off>', 'admit what the bound refuses while the engine visibly has room (nothing queued, a small batch), checked against its own miss rate').choices(['on', 'off']).default('on'))
    .option('--admission-headroom-batch-share <share>', 'the shortcut admits only while the running batch, with the request, fills at most this share of the sequence slots, (0, 1]', '0.25')
    .addOption(new Option('--admission-headroom-queue <on|off>', "the shortcut admits with requests waiting, counting them in the batch and their prompt work in this request's prefill ('off': only with nothing queued)").choices(['on', 'off']).default('on'))
    .option('--admission-keep-warm-ms <ms>', 'decide one made-up request every this many ms so the decision path stays in cache (0: off; measured: decision p99 ≤ 100 µs with it, ≤ 200 µs without)', '20')
    .option('--trace-out <file>', 'append one admission-trace JSON line per request (features as admission saw them, then the outcome)');
}

const nonNegative = (name: string, v: string): number => {
  const n = Number(v);
  if (v.trim() === '' || !(n >= 0 && Number.isFinite(n))) throw new StartupError(`--${name}: expected a number ≥ 0, got '${v}'`);
  return n;
};

export const share = (name: string, v: string): number => {
  const n = Number(v);
  if (v.trim() === '' || !(n > 0 && n <= 1)) throw new StartupError(`--${name}: expected a number in (0, 1], got '${v}'`);
  return n;
};

/** The admission configuration from its flags, without the artifact (its provenance check is per command). */
export function admissionBase(f: AdmissionFlags): AdmissionConfig {
  const guarantee = Number(f.admissionGuarantee);
  if (!(guarantee > 0 && guarantee < 1)) throw new StartupError(`--admission-guarantee: expected a number in (0, 1), got '${f.admissionGuarantee}'`);
  return {
    mode: f.admission,
    guarantee,
    calibration: f.admissionCalibration,
    allowMismatch: f.admissionAllowMismatch,
    headroom: f.admissionHeadroom === 'on',
    headroomBatchShare: share('admission-headroom-batch-share', f.admissionHeadroomBatchShare),
    headroomQueue: f.admissionHeadroomQueue === 'on',
    keepWarmMs: nonNegative('admission-keep-warm-ms', f.admissionKeepWarmMs),
  };
}
