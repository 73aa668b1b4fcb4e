// Self-training: the server fits its own E2E predictor from the outcomes it admits, so the bound a
// user gets out of the box is the one the offline pipeline (collect → `admission train` → warm
// start) gives, without anyone running that pipeline.
//
// It keeps a ring of the last `ringSize` admitted outcomes (features at admission, latency,
// censoring). When the ring holds `minRows` and either no model was trained yet, `retrainEvery`
// outcomes arrived since the last training, or the bound's coverage since the last swap fell
// `driftTolerance` below the promise (over at least `driftMinOutcomes`), it sends the ring to a
// worker thread (train-worker.ts) as one split-conformal round, in arrival order:
//   the older (1 − heldOutShare) of the rows, censored ones left out, fit the quantile GBDT;
//   the newest heldOutShare, censored ones included at the time they were cut, are its calibration
//   set: their scores start a fresh calibrator, as a warm start's traces do.
// The new model is swapped in (BoundModel.swap: predictor and calibrator together, between two
// decisions) when its pinball loss on the held-out rows is below the current predictor's and the
// held-out rows can certify the guarantee; otherwise the current one stays and the attempt is
// counted. The decision path never waits: it reads whichever model is in place.
//
// Costs: observe O(k) (a copy into the ring); a training copies the ring (about 2,000 × 16 numbers)
// and runs in the worker (about 250 ms for 850 rows of results/admission/mock/collect on this
// 2-core machine, timed around train()).

import { Worker } from 'node:worker_threads';
import type { BoundModel } from '../bound-model.ts';
import { createOnlineCalibrator, type CalibratorMode } from '../conformal/online-calibrator.ts';
import { minCalibrationSize } from '../conformal/quantile.ts';
import { ratioScore } from '../conformal/score.ts';
import { FEATURE_NAMES, NUM_FEATURES } from '../features.ts';
import { toPredictor, type PredictorModel, type QuantilePredictor } from '../predictor/predictor.ts';
import { pinball } from '../predictor/quantile.ts';
import type { TrainJob, TrainReply } from './train-job.ts';

export interface SelfTrainerOptions {
  /** The model it trains for and swaps into. */
  readonly target: BoundModel;
  /** The promise's miscoverage (the calibrator's α). */
  readonly alpha: number;
  readonly calibration: Exclude<CalibratorMode, 'static'>;
  /** The calibrator's window (rolling/ACI); its default when absent. */
  readonly window?: number;
  /** The base quantile level fitted (0.9). */
  readonly quantile: number;
  /** Outcomes kept; 2,000 by default. */
  readonly ringSize?: number;
  /** Outcomes before the first training; 200 by default (134 to fit, 66 to calibrate: a 95% guarantee needs 19). */
  readonly minRows?: number;
  /** Outcomes between two trainings; 500 by default. */
  readonly retrainEvery?: number;
  /** Share of the newest rows held out to calibrate; 1/3 by default. */
  readonly heldOutShare?: number;
  /** Coverage since the swap this far below 1 − α retrains at once; 0.03 by default. */
  readonly driftTolerance?: number;
  /** Outcomes since the swap before drift is judged; 100 by default. */
  readonly driftMinOutcomes?: number;
  /** Runs a job; the worker thread by default (tests may train in-thread). */
  readonly runJob?: (job: TrainJob) => Promise<TrainReply>;
  /** One line per swap or failure; none by default. */
  readonly log?: (line: string) => void;
}

export class SelfTrainer {
  readonly #o: Required<Omit<SelfTrainerOptions, 'window' | 'log' | 'runJob'>> & Pick<SelfTrainerOptions, 'window'>;
  readonly #log: (line: string) => void;
  readonly #runJob: (job: TrainJob) => Promise<TrainReply>;
  // The ring: row r's features at #x[r·k, (r+1)·k), its latency #y[r], censored #c[r].
  readonly #x: Float64Array;
  readonly #y: Float64Array;
  readonly #c: Uint8Array;
  #next = 0;
  #size = 0;
  #sinceTraining = 0;
  #training: Promise<void> | null = null;
  #jobId = 0;
  #numTrainings = 0;
  #numSwaps = 0;
  #numKept = 0;
  #lastError: string | null = null;
  #swappedAtMs: number | null = null;
  #lastSwap: { rows: number; heldOut: number; pinball: number; previousPinball: number | null; seconds: number } | null = null;
  // Coverage of the bound in force since the last swap.
  #sinceSwap = 0;
  #missesSinceSwap = 0;
  #worker: Worker | null = null;
  readonly #pending = new Map<number, (r: TrainReply) => void>();

  constructor(o: SelfTrainerOptions) {
    const ringSize = o.ringSize ?? 2000;
    this.#o = {
      target: o.target,
      alpha: o.alpha,
      calibration: o.calibration,
      quantile: o.quantile,
      ringSize,
      minRows: o.minRows ?? 200,
      retrainEvery: o.retrainEvery ?? 500,
      heldOutShare: o.heldOutShare ?? 1 / 3,
      driftTolerance: o.driftTolerance ?? 0.03,
      driftMinOutcomes: o.driftMinOutcomes ?? 100,
      ...(o.window === undefined ? {} : { window: o.window }),
    };
    if (!(this.#o.minRows >= 3 && this.#o.minRows <= ringSize)) throw new RangeError(`SelfTrainer: expected minRows in [3, ringSize], got ${this.#o.minRows}`);
    if (!(this.#o.heldOutShare > 0 && this.#o.heldOutShare < 1)) throw new RangeError(`SelfTrainer: expected heldOutShare in (0, 1), got ${this.#o.heldOutShare}`);
    this.#log = o.log ?? (() => undefined);
    this.#runJob = o.runJob ?? ((job) => this.#inWorker(job));
    this.#x = new Float64Array(ringSize * NUM_FEATURES);
    this.#y = new Float64Array(ringSize);
    this.#c = new Uint8Array(ringSize);
  }

  /** The training in progress, if any (tests await it). */
  get training(): Promise<void> | null {
    return this.#training;
  }

  /**
   * An admitted outcome: `boundMs` is the E2E bound the decision used (null: none), `y` the E2E
   * latency or the time it was cut at when `censored`. May start a training; never waits for one.
   */
  observe(features: Float64Array, y: number, censored: boolean, boundMs: number | null): void {
    const r = this.#next;
    this.#x.set(features, r * NUM_FEATURES);
    this.#y[r] = y;
    this.#c[r] = censored ? 1 : 0;
    this.#next = (r + 1) % this.#o.ringSize;
    if (this.#size < this.#o.ringSize) this.#size++;
    this.#sinceTraining++;
    if (this.#swappedAtMs !== null && boundMs !== null) {
      this.#sinceSwap++;
      if (y > boundMs) this.#missesSinceSwap++;
    }
    if (this.#training === null && this.#due()) this.#start();
  }

  state(): Record<string, unknown> {
    const nowMs = performance.now();
    return {
      rows: this.#size,
      numTrainings: this.#numTrainings,
      numSwaps: this.#numSwaps,
      numKept: this.#numKept,
      training: this.#training !== null,
      modelAgeS: this.#swappedAtMs === null ? null : Math.round((nowMs - this.#swappedAtMs) / 100) / 10,
      coverageSinceSwap: this.#sinceSwap === 0 ? null : 1 - this.#missesSinceSwap / this.#sinceSwap,
      outcomesSinceSwap: this.#sinceSwap,
      lastSwap: this.#lastSwap,
      lastError: this.#lastError,
    };
  }

  #due(): boolean {
    if (this.#size < this.#o.minRows) return false;
    if (this.#numTrainings === 0) return true;
    if (this.#sinceTraining >= this.#o.retrainEvery) return true;
    return this.#sinceSwap >= this.#o.driftMinOutcomes && 1 - this.#missesSinceSwap / this.#sinceSwap < 1 - this.#o.alpha - this.#o.driftTolerance;
  }

  #start(): void {
    this.#sinceTraining = 0;
    this.#numTrainings++;
    // The ring in arrival order: oldest first.
    const order = Array.from({ length: this.#size }, (_, i) => (this.#size < this.#o.ringSize ? i : (this.#next + i) % this.#o.ringSize));
    const numHeldOut = Math.max(1, Math.floor(order.length * this.#o.heldOutShare));
    const fitRows = order.slice(0, order.length - numHeldOut).filter((r) => this.#c[r] === 0);
    const heldOut = order.slice(order.length - numHeldOut);
    const x = new Float64Array(fitRows.length * NUM_FEATURES);
    const y = new Float64Array(fitRows.length);
    fitRows.forEach((r, i) => {
      x.set(this.#x.subarray(r * NUM_FEATURES, (r + 1) * NUM_FEATURES), i * NUM_FEATURES);
      y[i] = this.#y[r]!;
    });
    const heldX = heldOut.map((r) => this.#x.slice(r * NUM_FEATURES, (r + 1) * NUM_FEATURES));
    const heldY = heldOut.map((r) => this.#y[r]!);
    const job: TrainJob = { id: ++this.#jobId, featureNames: FEATURE_NAMES, x, y, quantile: this.#o.quantile };
    this.#training = this.#runJob(job)
      .then((reply) => this.#finish(reply, heldX, heldY, fitRows.length))
      .catch((err: unknown) => {
        this.#lastError = err instanceof Error ? err.message : String(err);
        this.#log(`admission self-training failed: ${this.#lastError}`);
      })
      .finally(() => (this.#training = null));
  }

  #finish(reply: TrainReply, heldX: readonly Float64Array[], heldY: readonly number[], numFitRows: number): void {
    if (!reply.ok) throw new Error(reply.error);
    const predictor = toPredictor(reply.model as PredictorModel);
    const previous = this.#o.target.base;
    const current: QuantilePredictor | null = previous.kind === 'artifact' ? previous.predictor : previous.model.ready ? previous.model : null;
    const loss = (p: QuantilePredictor): number => heldY.reduce((s, y, i) => s + pinball(y, Math.max(0, p.predict(heldX[i]!)), this.#o.quantile), 0) / heldY.length;
    const newLoss = loss(predictor);
    const oldLoss = current === null ? null : loss(current);
    if (heldY.length < minCalibrationSize(this.#o.alpha) || (oldLoss !== null && !(newLoss < oldLoss))) {
      this.#numKept++;
      return;
    }
    const initial = heldY.map((y, i) => ({ yhat: Math.max(0, predictor.predict(heldX[i]!)), y }));
    const calibrator = createOnlineCalibrator({ mode: this.#o.calibration, score: ratioScore, alpha: this.#o.alpha, initial, minN: minCalibrationSize(this.#o.alpha), ...(this.#o.window === undefined ? {} : { window: this.#o.window }) });
    this.#o.target.swap({ kind: 'artifact', predictor, description: `self-trained gbdt (τ=${this.#o.quantile}, ${numFitRows} rows, calibrated on the next ${heldY.length})` }, calibrator);
    this.#numSwaps++;
    this.#swappedAtMs = performance.now();
    this.#sinceSwap = 0;
    this.#missesSinceSwap = 0;
    this.#lastSwap = { rows: numFitRows, heldOut: heldY.length, pinball: round(newLoss), previousPinball: oldLoss === null ? null : round(oldLoss), seconds: round(reply.seconds) };
    this.#log(`admission: self-trained E2E predictor swapped in (${numFitRows} rows, held-out pinball ${round(newLoss)} ms vs ${oldLoss === null ? 'none' : `${round(oldLoss)} ms`})`);
  }

  #inWorker(job: TrainJob): Promise<TrainReply> {
    if (this.#worker === null) {
      const w = new Worker(new URL('./worker-entry.mjs', import.meta.url));
      w.on('message', (r: TrainReply) => {
        const resolve = this.#pending.get(r.id);
        this.#pending.delete(r.id);
        resolve?.(r);
      });
      w.on('error', (err) => {
        for (const [id, resolve] of this.#pending) resolve({ id, ok: false, error: err.message });
        this.#pending.clear();
        this.#worker = null;
      });
      // Never what keeps the process alive (after the listeners: attaching one refs the port again).
      w.unref();
      this.#worker = w;
    }
    const w = this.#worker;
    return new Promise((resolve) => {
      this.#pending.set(job.id, resolve);
      w.postMessage(job);
    });
  }
}

const round = (v: number): number => Math.round(v * 10) / 10;
