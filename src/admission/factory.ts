// Builds the admission controller named by configuration: `off` (admit everything: the ablation's
// baseline) or `conformal` (on by default in `headroom serve`). Without an artifact the predictor
// is the online throughput baseline, fitted from the server's own outcomes; an offline artifact
// (`headroom admission train`) replaces it for the E2E target after a provenance check.

import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { BoundModel } from './bound-model.ts';
import { loadDataset } from './dataset.ts';
import type { BasePredictor } from './bound-model.ts';
import { createOnlineCalibrator } from './conformal/online-calibrator.ts';
import { DEFAULT_MIN_N, minCalibrationSize } from './conformal/quantile.ts';
import type { CalibratorMode } from './conformal/online-calibrator.ts';
import { ratioScore } from './conformal/score.ts';
import { ConformalController } from './conformal-controller.ts';
import { Headroom } from './decision/headroom.ts';
import { PersistentController } from './persistent-state.ts';
import { SelfTrainer, type SelfTrainerOptions } from './self-train/self-trainer.ts';
import type { AdmissionController } from './controller.ts';
import { admitAll } from './controller.ts';
import type { FeatureName } from './features.ts';
import { FEATURE_NAMES, NUM_FEATURES } from './features.ts';
import { checkArtifact, loadArtifact } from './predictor/artifact.ts';
import { OnlineLinearQuantile } from './predictor/online-linear.ts';
import { toPredictor } from './predictor/predictor.ts';

export interface AdmissionConfig {
  readonly mode: 'off' | 'conformal';
  /** Guarantee: the share of admitted requests inside their budget, e.g. 0.95. */
  readonly guarantee?: number;
  readonly calibration?: Exclude<CalibratorMode, 'static'>;
  /** Outcomes the rolling / ACI calibrator keeps. */
  readonly window?: number;
  /** Small-n guard: below this many outcomes the bound is "uncalibrated" and the controller explores. */
  readonly minOutcomes?: number;
  /** An offline predictor artifact for the E2E target. */
  readonly artifactPath?: string;
  /**
   * Warm start: trace rows (a folder, as the collection writes them) whose outcomes calibrate the
   * artifact's bound from the first request, instead of exploring until the small-n guard is met.
   */
  readonly calibrationTraces?: string;
  /** What the artifact must have been fitted on; mismatches refuse to start unless `allowMismatch`. */
  readonly expect?: { readonly runner: string; readonly modelSha256: string; readonly machine: string };
  readonly allowMismatch?: boolean;
  /** The under-capacity shortcut (decision/headroom.ts): on unless false. */
  readonly headroom?: boolean;
  /** The shortcut's cap on the running batch, as a share of the sequence slots (0.25 by default). */
  readonly headroomBatchShare?: number;
  /** The shortcut admits with a queue, reading it (true unless false: measured to keep more goodput at and below saturation, docs/admission.md). */
  readonly headroomQueue?: boolean;
  /** Decide one made-up request on the rehearsal twin every this many ms, keeping the decision path in cache (0 or absent: never; `headroom serve` defaults to 20; rehearse.ts). */
  readonly keepWarmMs?: number;
  /** Where warnings go (default console.error). */
  readonly warn?: (msg: string) => void;
  /**
   * Keep what the controller learns across restarts in this directory (persistent-state.ts), for
   * outcomes measured on this runner, model and machine (the rest of the provenance is this config's).
   */
  readonly state?: { readonly dir: string; readonly runner: string; readonly modelSha256: string; readonly machine: string };
  /**
   * Without an artifact: train the E2E predictor (a quantile GBDT) from the server's own admitted
   * outcomes in a worker thread and swap it in when it beats the current one on held-out outcomes
   * (self-train/self-trainer.ts). Ignored with an artifact.
   */
  readonly selfTrain?: boolean;
  /**
   * Bound E2E by the lesser of the learned bound and the throughput arithmetic's (its factor
   * calibrated on the same outcomes), each at half the miscoverage (decision/cold-start.ts).
   */
  readonly arithmeticBound?: boolean;
  /** Refuse a request whose admission would make a running request late (decision/protect.ts); default true. */
  readonly protectRunning?: boolean;
  /** The self-trainer's schedule (tests shorten it). */
  readonly selfTrainOptions?: Pick<SelfTrainerOptions, 'minRows' | 'retrainEvery' | 'ringSize' | 'runJob'>;
}

/**
 * The online linear baselines (E2E and TTFT) the server starts with. `quantile` is the base model's
 * level: a stable estimate that the conformal step inflates to the guarantee.
 *
 * `ridge` is relative to each column's sum of squares (util/linsolve.ts). With 1e-9, the offline
 * default that only survives an exactly constant column, the first fits (7 rows on) predicted
 * 80-400 s for requests that took 2 s when outputs end at EOS under a constant max_tokens cap
 * (`running`, `max_tokens` and `remaining_decode_tokens` then nearly collinear). Those predictions
 * are scored, and the rolling calibrator keeps 512 scores: replayed on recorded chat-natural runs
 * (bench/admission/replay-linear.ts), 63-70% of the later bounds sat over the SLO in two of them,
 * against 0% with 0.01. `minRows`, the outcomes before the first fit, stays one more than the
 * coefficients: 24 fixed the same runs in the replay, but served at 2x it left the bound
 * uncalibrated longer and refused more (results/admission/natural-ridge-5min).
 */
export const ONLINE_BASELINE = {
  quantile: 0.9,
  window: 2000,
  ridge: 0.01,
  minRows: 7,
  e2eColumns: ['new_prefill_tokens', 'max_tokens', 'prompt_work_ahead', 'remaining_decode_tokens', 'running'] satisfies readonly FeatureName[],
  ttftColumns: ['new_prefill_tokens', 'prompt_work_ahead', 'running', 'waiting'] satisfies readonly FeatureName[],
} as const;

const columnsOf = (names: readonly FeatureName[]): number[] => names.map((n) => FEATURE_NAMES.indexOf(n));

/** A fresh online baseline over the given columns, with ONLINE_BASELINE's settings (bench/ varies the two numbers). */
export function onlineBaseline(columns: readonly FeatureName[], ridge: number = ONLINE_BASELINE.ridge, minRows: number = ONLINE_BASELINE.minRows): OnlineLinearQuantile {
  const { quantile, window } = ONLINE_BASELINE;
  return new OnlineLinearQuantile({ quantile, columns: columnsOf(columns), numFeatures: NUM_FEATURES, windowSize: window, ridge, minRows });
}

function online(columns: readonly FeatureName[]): BasePredictor {
  return { kind: 'online', model: onlineBaseline(columns) };
}

export function createAdmissionController(c: AdmissionConfig): AdmissionController {
  if (c.mode === 'off') return admitAll;
  const guarantee = c.guarantee ?? 0.95;
  if (!(guarantee > 0 && guarantee < 1)) throw new Error(`admission: expected a guarantee in (0, 1), got ${guarantee}`);
  const alpha = 1 - guarantee;
  const calibrator = () =>
    createOnlineCalibrator({ mode: c.calibration ?? 'rolling', score: ratioScore, alpha, ...(c.minOutcomes === undefined ? {} : { minN: c.minOutcomes }), ...(c.window === undefined ? {} : { window: c.window }) });
  let e2eBase = online(ONLINE_BASELINE.e2eColumns);
  if (c.artifactPath !== undefined) {
    const loaded = loadArtifact(c.artifactPath);
    if (!loaded.ok) throw new Error(`admission: cannot use ${c.artifactPath}: ${loaded.reason}`);
    const a = loaded.artifact;
    if (c.expect !== undefined) {
      const bad = checkArtifact(a, { ...c.expect, featureNames: FEATURE_NAMES });
      if (bad.length > 0) {
        const what = bad.map((m) => `${m.field} (artifact ${JSON.stringify(m.artifact)}, here ${JSON.stringify(m.current)})`).join('; ');
        if (c.allowMismatch !== true) throw new Error(`admission: ${c.artifactPath} was fitted elsewhere: ${what}; refit it here, or pass --admission-allow-mismatch`);
        (c.warn ?? console.error)(`headroom: WARNING: admission artifact ${c.artifactPath} was fitted elsewhere: ${what}; its bound may be arbitrary here`);
      }
    }
    e2eBase = { kind: 'artifact', predictor: toPredictor(a.model), description: `${a.model.kind} artifact ${c.artifactPath} (τ=${a.quantile}, ${a.training.numRows} rows)` };
  }
  let initial: { yhat: number; y: number }[] = [];
  if (c.calibrationTraces !== undefined) {
    if (e2eBase.kind !== 'artifact') throw new Error('admission: calibration traces need an artifact (the online baseline has no predictions for them)');
    // Censored rows too, at the time they were cut: a request cut past its budget is a miss.
    const ds = loadDataset(c.calibrationTraces, 'e2e', 'keep');
    const p = e2eBase.predictor;
    initial = Array.from({ length: ds.numRows }, (_, i) => ({ yhat: Math.max(0, p.predict(ds.x.subarray(i * NUM_FEATURES, (i + 1) * NUM_FEATURES))), y: ds.y[i]! }));
  }
  // With the arithmetic bound beside it, each of the two is calibrated at α/2: the lesser misses with probability ≤ α.
  const e2eAlpha = c.arithmeticBound === true ? alpha / 2 : alpha;
  const e2eCalibrator = createOnlineCalibrator({
    mode: c.calibration ?? 'rolling',
    score: ratioScore,
    alpha: e2eAlpha,
    initial,
    minN: warmMinN(c, initial.length, e2eAlpha, guarantee),
    ...(c.window === undefined ? {} : { window: c.window }),
  });
  const e2e = new BoundModel(e2eBase, e2eCalibrator);
  const selfTrainer =
    c.selfTrain === true && c.artifactPath === undefined
      ? new SelfTrainer({ target: e2e, alpha: e2eAlpha, calibration: c.calibration ?? 'rolling', quantile: ONLINE_BASELINE.quantile, ...(c.window === undefined ? {} : { window: c.window }), ...c.selfTrainOptions, log: (line) => console.error(`headroom: ${line}`) })
      : undefined;
  const controller = new ConformalController({
    alpha,
    e2e,
    ...(selfTrainer === undefined ? {} : { selfTrainer }),
    arithmeticBound: c.arithmeticBound === true,
    protectRunning: c.protectRunning !== false,
    ttft: new BoundModel(online(ONLINE_BASELINE.ttftColumns), calibrator()),
    ...(c.headroom === false ? {} : { headroom: new Headroom({ alpha, allowQueue: c.headroomQueue !== false, ...(c.headroomBatchShare === undefined ? {} : { maxRunningFraction: c.headroomBatchShare }) }) }),
  });
  if (c.state === undefined) return controller;
  const { dir, runner, modelSha256, machine } = c.state;
  const artifactSha256 = c.artifactPath === undefined ? null : createHash('sha256').update(readFileSync(c.artifactPath)).digest('hex');
  return new PersistentController(controller, {
    dir,
    provenance: { runner, modelSha256, machine, featureNames: FEATURE_NAMES, guarantee, calibration: c.calibration ?? 'rolling', artifactSha256 },
    log: (line) => console.error(`headroom: ${line}`),
  });
}

/**
 * The small-n guard of the E2E bound. A window filling from nothing waits for `minOutcomes` (100).
 * A warm start's held-out rows are a split-conformal calibration set: its quantile is valid at any
 * size whose rank ⌈(n+1)(1−α)⌉ is at most n, so the bound is calibrated from the first request with
 * as few as that (19 rows for a 95% guarantee). Held to 100, the 83–87 rows of the long-prompt and
 * chat benchmarks' warm starts left the bound uncalibrated for its first outcomes, and the
 * cold-start arithmetic admitted what then missed (docs/admission.md). Fewer rows than any rank
 * allows is a start-up error: such traces cannot calibrate this guarantee.
 */
function warmMinN(c: AdmissionConfig, numInitial: number, alpha: number, guarantee: number): number {
  const minN = c.minOutcomes ?? DEFAULT_MIN_N;
  if (numInitial === 0) return minN;
  const need = minCalibrationSize(alpha);
  if (numInitial < need) {
    throw new Error(
      `admission: ${c.calibrationTraces ?? 'the calibration traces'} hold ${numInitial} admitted outcomes, too few to certify a ${guarantee} guarantee (it needs at least ${need}); collect more, or lower --admission-guarantee`,
    );
  }
  return Math.min(minN, numInitial);
}
