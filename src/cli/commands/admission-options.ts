// The admission-control flags both serving commands read the same way: `serve` decides on its
// engine's snapshot, `gateway` on its books of what is in flight upstream (proxy/gateway-load.ts).
// The defaults differ in one place only: admission is on by default in engine mode and off in
// gateway mode (there it needs traces collected in front of the upstreams to be more than cautious;
// docs/gateway.md).

import type { AdmissionConfig } from '../../admission/factory.ts';
import { anyText, existingDir, existingFile, numberAtLeast0, numberIn } from '../option-parsers.ts';
import type { OptionValues } from '../option-table.ts';
import { choice, flag, opt } from '../option-table.ts';

/** The admission options of a serving command whose admission is `defaultMode` unless told. */
export function admissionOptions<const M extends 'conformal' | 'off'>(defaultMode: M) {
  return [
    choice('--admission <mode>', 'admission control: admit a request only if its calibrated latency bound fits its budget', ['conformal', 'off'], defaultMode),
    opt('--admission-guarantee <p>', 'share of admitted requests promised to finish inside their budget, (0, 1)', numberIn('(0, 1)'), { default: '0.95' }),
    choice('--admission-calibration <mode>', 'online conformal calibration: rolling window or adaptive (ACI)', ['rolling', 'aci'], 'rolling'),
    opt('--admission-artifact <file>', 'an offline E2E predictor (headroom admission train); default: an online baseline fitted from outcomes', existingFile),
    opt('--admission-calibration-traces <dir>', 'warm start: calibrate the artifact on these collected traces from the first request', existingDir),
    flag('--admission-allow-mismatch', 'use an artifact fitted on another runner, model or machine (warns)'),
    choice('--admission-arithmetic-bound <on|off>', "also bound E2E by the throughput arithmetic times a factor calibrated on the server's own outcomes; the lesser bound decides, each calibrated at half the miscoverage", ['on', 'off'], 'off'),
    choice('--admission-protect-running <on|off>', 'refuse a request that fits its own budget when admitting it would make a request already running finish past its deadline (by the measured step times; engine mode: a gateway sees no running deadlines)', ['on', 'off'], 'on'),
    choice('--admission-headroom <on|off>', 'admit what the bound refuses while the engine visibly has room (nothing queued, a small batch), checked against its own miss rate', ['on', 'off'], 'on'),
    opt('--admission-headroom-batch-share <share>', 'the shortcut admits only while the running batch, with the request, fills at most this share of the sequence slots, (0, 1]', numberIn('(0, 1]'), { default: '0.25' }),
    choice('--admission-headroom-queue <on|off>', "the shortcut admits with requests waiting, counting them in the batch and their prompt work in this request's prefill ('off': only with nothing queued)", ['on', 'off'], 'on'),
    opt('--admission-keep-warm-ms <ms>', 'decide one made-up request every this many ms so the decision path stays in cache (0: off; measured: decision p99 ≤ 100 µs with it, ≤ 200 µs without)', numberAtLeast0, { default: '20' }),
    // Whether the file can be appended to is checked before listening (front-door.ts checkTraceOut).
    opt('--trace-out <file>', 'append one admission-trace JSON line per request (features as admission saw them, then the outcome)', anyText),
  ];
}

export type AdmissionOptions = OptionValues<ReturnType<typeof admissionOptions>>;

/** The admission configuration from its flags, without the artifact (its provenance check is per command). */
export function admissionBase(f: AdmissionOptions): AdmissionConfig {
  return {
    mode: f.admission,
    guarantee: f.admissionGuarantee,
    calibration: f.admissionCalibration,
    allowMismatch: f.admissionAllowMismatch,
    arithmeticBound: f.admissionArithmeticBound === 'on',
    protectRunning: f.admissionProtectRunning === 'on',
    headroom: f.admissionHeadroom === 'on',
    headroomBatchShare: f.admissionHeadroomBatchShare,
    headroomQueue: f.admissionHeadroomQueue === 'on',
    keepWarmMs: f.admissionKeepWarmMs,
  };
}
