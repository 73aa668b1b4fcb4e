// Benchmark analysis (not a test): replays recorded runs through the server's online E2E bound
// (the online linear baseline and its rolling ratio-score calibrator, as src/admission/factory.ts
// builds them) at several ridges and several minimums of outcomes before the baseline's first fit
// (7 = one more than its coefficients), to see how far its bounds stray from the latencies served.
//
// Events in time order: every request, admitted or refused, is predicted and bounded at its
// arrival; each admitted, uncensored outcome is scored against the prediction made at its arrival
// and fed to the model at its finish (arrival + E2E), through the server's own BoundModel (its
// refit cadence included). The bound depends only on the recorded features and outcomes, not on
// what the run's own controller decided.
//
// Printed per trace, ridge and minimum: decisions with a calibrated bound, their median, 99th
// percentile and largest bound, the share of them over the SLO (refused by the learned bound), and
// the share of admitted uncensored E2E latencies at or under their bound (the guarantee is 95%).
//
//   node --import tsx bench/admission/replay-linear.ts <trace.jsonl>... [--ridge 1e-9,0.01] [--min-rows 7,24]
import { readFileSync } from 'node:fs';
import { BoundModel } from '../../src/admission/bound-model.ts';
import { RollingCalibrator } from '../../src/admission/conformal/rolling-calibrator.ts';
import { ratioScore } from '../../src/admission/conformal/score.ts';
import { parseTrace } from '../../src/admission/dataset.ts';
import { FEATURE_NAMES, NUM_FEATURES } from '../../src/admission/features.ts';
import { ONLINE_BASELINE, onlineBaseline } from '../../src/admission/factory.ts';
import type { TraceRow } from '../../src/admission/trace-writer.ts';

const ALPHA = 0.05;

function list(flag: string, fallback: number[]): number[] {
  const at = process.argv.indexOf(flag);
  return at < 0 ? fallback : process.argv[at + 1]!.split(',').map(Number);
}
const ridges = list('--ridge', [1e-9, ONLINE_BASELINE.ridge]);
const minimums = list('--min-rows', [ONLINE_BASELINE.minRows, 24]);
const files = process.argv.slice(2).filter((a, i, all) => !a.startsWith('--') && !all[i - 1]?.startsWith('--'));
if (files.length === 0 || ridges.some((r) => !(r >= 0)) || minimums.some((m) => !Number.isInteger(m) || m < ONLINE_BASELINE.e2eColumns.length + 2)) {
  console.error('usage: replay-linear.ts <trace.jsonl>... [--ridge 1e-9,0.01] [--min-rows 7,24]');
  process.exit(2);
}

function vector(r: TraceRow): Float64Array {
  const x = new Float64Array(NUM_FEATURES);
  FEATURE_NAMES.forEach((name, j) => (x[j] = r.features[name] ?? 0));
  return x;
}

const s = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
const pct = (a: number, b: number) => `${((100 * a) / Math.max(1, b)).toFixed(1)}%`;

for (const file of files) {
  const rows = parseTrace(readFileSync(file, 'utf8'), file);
  type Event = { t: number; finish: boolean; r: TraceRow; i: number };
  const events: Event[] = [];
  rows.forEach((r, i) => {
    events.push({ t: r.arrival_ms, finish: false, r, i });
    if (r.admitted && !r.censored && r.e2e_ms !== null) events.push({ t: r.arrival_ms + r.e2e_ms, finish: true, r, i });
  });
  events.sort((a, b) => a.t - b.t || Number(b.finish) - Number(a.finish));
  for (const ridge of ridges) {
    for (const minRows of minimums) {
      const bound = new BoundModel({ kind: 'online', model: onlineBaseline(ONLINE_BASELINE.e2eColumns, ridge, minRows) }, new RollingCalibrator({ score: ratioScore, alpha: ALPHA }));
      const yhatAt = new Map<number, number | null>();
      const boundAt = new Map<number, number>();
      for (const e of events) {
        if (e.finish) {
          bound.observe(vector(e.r), yhatAt.get(e.i) ?? null, e.r.e2e_ms!, false);
          continue;
        }
        const yhat = bound.predict(vector(e.r));
        yhatAt.set(e.i, yhat);
        const b = bound.bound(yhat);
        if (b.status === 'calibrated') boundAt.set(e.i, b.upper);
      }
      const bounds = [...boundAt.values()].sort((a, b) => a - b);
      const q = (p: number) => bounds[Math.min(bounds.length - 1, Math.floor(p * bounds.length))] ?? NaN;
      let judged = 0;
      let covered = 0;
      for (const [i, b] of boundAt) {
        const r = rows[i]!;
        if (!r.admitted || r.censored || r.e2e_ms === null) continue;
        judged++;
        if (r.e2e_ms <= b) covered++;
      }
      const over = bounds.filter((b) => b > rows[0]!.slo_ms).length;
      console.log(
        `${file}  ridge ${ridge}, min rows ${minRows}: ${bounds.length} bounds, median ${s(q(0.5))}, p99 ${s(q(0.99))}, max ${s(q(1))}, ` +
          `over the SLO ${pct(over, bounds.length)}; admitted E2E <= bound ${pct(covered, judged)} of ${judged}`,
      );
    }
  }
}
