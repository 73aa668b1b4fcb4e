// One self-training job as plain data in and out: what the worker thread runs (train-worker.ts),
// and what a test can run in-thread.

import { train } from '../predictor/train.ts';

/** One job: row-major features, latencies, and what to fit. */
export interface TrainJob {
  readonly id: number;
  readonly featureNames: readonly string[];
  readonly x: Float64Array;
  readonly y: Float64Array;
  readonly quantile: number;
}

export type TrainReply =
  | { readonly id: number; readonly ok: true; readonly model: unknown; readonly seconds: number }
  | { readonly id: number; readonly ok: false; readonly error: string };

/** Fit the quantile GBDT on the job's rows; a bad job is an error reply, never a throw. */
export function runTrainJob(job: TrainJob): TrainReply {
  try {
    const k = job.featureNames.length;
    const n = job.y.length;
    const r = train({
      featureNames: job.featureNames,
      X: Array.from({ length: n }, (_, i) => job.x.subarray(i * k, (i + 1) * k)),
      y: job.y,
      quantile: job.quantile,
      model: { kind: 'gbdt' },
      provenance: { runner: 'self', modelSha256: 'self', machine: 'self', command: 'self-train', createdAt: new Date().toISOString() },
    });
    return { id: job.id, ok: true, model: r.artifact.model, seconds: r.seconds };
  } catch (err) {
    return { id: job.id, ok: false, error: err instanceof Error ? err.message : String(err) };
  }
}
