// The one call a training command makes: rows, names and a model choice in; a validated artifact,
// a ready predictor and a short report out. Splitting the data is the caller's job and matters
// more than any option here: whole collection runs go to whole folds (train / calibrate / test),
// because a time split inside an overloaded block leaves the deepest queues to the last fold and
// the trees then extrapolate past every split point they saw (cadence writeup: coverage 0.34).
//
// Bad input (a mismatched row, an unknown column name, collinear linear columns) throws a
// RangeError naming it: training is an offline command and its caller prints the message.

import { createHash } from 'node:crypto';
import { ARTIFACT_FORMAT, ARTIFACT_VERSION, type PredictorArtifact, type Provenance } from './artifact.ts';
import { fitConstantQuantile, fitLinearQuantile } from './baselines.ts';
import { featureImportance, fitGbdt, type GbdtOptions } from './gbdt.ts';
import { toPredictor, type FeatureRow, type PredictorModel, type QuantilePredictor } from './predictor.ts';
import { checkDataset, checkQuantile, meanPinball } from './quantile.ts';

export type TrainModelSpec =
  | { readonly kind: 'gbdt'; readonly options?: Omit<GbdtOptions, 'quantile'> }
  /** Throughput arithmetic on the named columns. */
  | { readonly kind: 'linear'; readonly columns: readonly string[]; readonly ridge?: number }
  | { readonly kind: 'constant' };

export interface TrainInput {
  /** Column names of X, in order; the serving feature extractor must produce the same order. */
  readonly featureNames: readonly string[];
  readonly X: readonly FeatureRow[];
  /** Latency per row (the unit is the caller's; ms in Headroom). */
  readonly y: ArrayLike<number>;
  /** τ: the base level, about 0.9, not the guarantee level (see predictor.ts). */
  readonly quantile: number;
  readonly model: TrainModelSpec;
  /** dataSha256 is computed from X, y and the names when absent. */
  readonly provenance: Omit<Provenance, 'dataSha256'> & { readonly dataSha256?: string };
}

export interface TrainResult {
  readonly artifact: PredictorArtifact;
  readonly predictor: QuantilePredictor;
  /** Mean pinball loss on the training rows. */
  readonly trainPinball: number;
  /** Per feature, for the GBDT only: total split gain and its share. */
  readonly importance: readonly { readonly feature: string; readonly gain: number; readonly share: number }[] | null;
  readonly seconds: number;
  /** Conditions worth printing that do not stop training (e.g. too few rows above the quantile). */
  readonly warnings: readonly string[];
}

/**
 * Fewest rows expected above the fitted quantile before train() warns. The reference fitted a
 * 0.995 quantile with about seven rows above it and got a constant; at 0.9 the same data put
 * hundreds above it and the model tracked load.
 */
export const MIN_ROWS_ABOVE_QUANTILE = 100;

export function train(input: TrainInput): TrainResult {
  const t0 = performance.now();
  const { featureNames, X, y, quantile } = input;
  checkQuantile('train', quantile);
  const numFeatures = checkDataset('train', X, y);
  if (featureNames.length !== numFeatures) throw new RangeError(`train: expected ${numFeatures} feature names, got ${featureNames.length}`);
  if (new Set(featureNames).size !== featureNames.length) throw new RangeError(`train: expected distinct feature names, got ${JSON.stringify(featureNames)}`);

  let model: PredictorModel;
  let options: Record<string, string | number | readonly string[]>;
  let importance: TrainResult['importance'] = null;
  const spec = input.model;
  switch (spec.kind) {
    case 'gbdt': {
      const fit = fitGbdt(X, y, { ...spec.options, quantile });
      model = fit.model;
      options = { kind: 'gbdt', ...fit.options };
      importance = featureImportance(fit.model).map((imp, f) => ({ feature: featureNames[f]!, ...imp }));
      break;
    }
    case 'linear': {
      const columns = spec.columns.map((name) => {
        const f = featureNames.indexOf(name);
        if (f < 0) throw new RangeError(`train: expected linear columns among the feature names, got '${name}'`);
        return f;
      });
      const fitted = fitLinearQuantile(X, y, spec.ridge === undefined ? { quantile, columns } : { quantile, columns, ridge: spec.ridge });
      if (fitted === null) throw new RangeError(`train: the linear columns [${spec.columns.join(', ')}] are collinear on these rows`);
      model = fitted;
      options = { kind: 'linear', columns: [...spec.columns], ridge: spec.ridge ?? 1e-9 };
      break;
    }
    case 'constant':
      model = fitConstantQuantile(X, y, quantile);
      options = { kind: 'constant' };
      break;
  }

  const predictor = toPredictor(model);
  const trainPinball = meanPinball(y, Float64Array.from(X, (x) => predictor.predict(x)), quantile);
  const artifact: PredictorArtifact = {
    format: ARTIFACT_FORMAT,
    version: ARTIFACT_VERSION,
    featureNames: [...featureNames],
    quantile,
    model,
    training: { numRows: X.length, options },
    provenance: {
      // In the artifact's field order, so a saved and reloaded artifact serialises identically.
      runner: input.provenance.runner,
      modelSha256: input.provenance.modelSha256,
      machine: input.provenance.machine,
      dataSha256: input.provenance.dataSha256 ?? datasetSha256(featureNames, X, y),
      command: input.provenance.command,
      createdAt: input.provenance.createdAt,
    },
  };
  const warnings: string[] = [];
  const numAbove = Math.round(X.length * (1 - quantile));
  if (numAbove < MIN_ROWS_ABOVE_QUANTILE) {
    warnings.push(
      `only about ${numAbove} of ${X.length} rows lie above the ${quantile} quantile (${MIN_ROWS_ABOVE_QUANTILE} wanted); collect more rows, or fit a lower base level (at most ${Math.max(0, Math.floor(100 * (1 - MIN_ROWS_ABOVE_QUANTILE / X.length)) / 100)} here) and let the conformal step inflate it`,
    );
  }
  return { artifact, predictor, trainPinball, importance, seconds: (performance.now() - t0) / 1000, warnings };
}

/** sha256 over the names, then every row's doubles and its target, in order. */
export function datasetSha256(featureNames: readonly string[], X: readonly FeatureRow[], y: ArrayLike<number>): string {
  const h = createHash('sha256');
  h.update(JSON.stringify(featureNames));
  const row = new Float64Array((X[0]?.length ?? 0) + 1);
  for (let i = 0; i < X.length; i++) {
    row.set(X[i]!);
    row[row.length - 1] = y[i]!;
    h.update(new Uint8Array(row.buffer));
  }
  return h.digest('hex');
}
