// The predictor artifact: one versioned JSON file holding a fitted model, the feature names in
// column order, τ, the training options, and where it came from. The server loads it at start-up
// and compares its provenance with the running system, because a bound calibrated on one runner,
// model or machine is not conservative on another, it is arbitrary (cadence writeup).
//
//   { "format": "headroom-latency-predictor", "version": 1,
//     "featureNames": ["prompt_tokens", …],  "quantile": 0.9,
//     "model": { "kind": "gbdt", "base", "roots", "feature", "threshold", "left", "right", "value", "featureGain", … }
//            | { "kind": "linear", "columns", "intercept", "coefficients", "shift", … }
//            | { "kind": "constant", "value", … },
//     "training": { "numRows": 12000, "options": { … } },
//     "provenance": { "runner", "modelSha256", "machine", "dataSha256", "command", "createdAt" } }
//
// Numbers are JSON's shortest round-trip form, so a saved model predicts bit for bit what the
// fitted one did (fits never store −0, the one double JSON cannot carry).
//
// Loading is validation, not trust: the shape is checked, then the structure (array lengths
// agree, every child index points forward inside the node arrays so a walk terminates, feature
// indices fit the feature names). A bad file is an expected condition and comes back as
// { ok: false, reason }; nothing here throws on user data.

import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { z } from 'zod';
import type { PredictorModel } from './predictor.ts';
import { bug } from '../../util/bug.ts';

export const ARTIFACT_FORMAT = 'headroom-latency-predictor';
export const ARTIFACT_VERSION = 1;

/** Where a model came from, passed in by whoever trains it. */
export interface Provenance {
  /** The runner the traces were collected on ('llama', 'mock', an upstream's name …). */
  readonly runner: string;
  /** sha256 of the served model file. */
  readonly modelSha256: string;
  /** An identity of the hardware (CPU/GPU model, core count …), compared as a string. */
  readonly machine: string;
  /** sha256 of the training data. */
  readonly dataSha256: string;
  /** The command line that trained it. */
  readonly command: string;
  /** ISO 8601. */
  readonly createdAt: string;
}

export interface PredictorArtifact {
  readonly format: typeof ARTIFACT_FORMAT;
  readonly version: typeof ARTIFACT_VERSION;
  readonly featureNames: readonly string[];
  readonly quantile: number;
  readonly model: PredictorModel;
  readonly training: { readonly numRows: number; readonly options: Readonly<Record<string, string | number | readonly string[]>> };
  readonly provenance: Provenance;
}

export type ArtifactLoad = { readonly ok: true; readonly artifact: PredictorArtifact } | { readonly ok: false; readonly reason: string };

/** The artifact as JSON text (typed arrays as plain arrays). */
export function serializeArtifact(artifact: PredictorArtifact): string {
  return JSON.stringify(artifact, (_key, v: unknown) => (ArrayBuffer.isView(v) ? Array.from(v as Float64Array) : v), 2) + '\n';
}

/** Writes the artifact next to its final name, then renames, so a reader never sees half a file. */
export function saveArtifact(path: string, artifact: PredictorArtifact): void {
  const text = serializeArtifact(artifact);
  const check = parseArtifact(text);
  if (!check.ok) bug(`refusing to save an artifact that would not load: ${check.reason}`);
  writeFileSync(`${path}.tmp`, text);
  renameSync(`${path}.tmp`, path);
}

export function loadArtifact(path: string): ArtifactLoad {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    return { ok: false, reason: `cannot read ${path}: ${(err as Error).message}` };
  }
  const r = parseArtifact(text);
  return r.ok ? r : { ok: false, reason: `${path}: ${r.reason}` };
}

const finite = z.number().refine(Number.isFinite, 'expected a finite number');
const int = z.number().int();
const quantile = z.number().gt(0).lt(1);
const common = { quantile, numFeatures: int.min(1) };
const modelSchema = z.discriminatedUnion('kind', [
  z.strictObject({
    kind: z.literal('gbdt'),
    ...common,
    target: z.enum(['identity', 'log1p']),
    base: finite,
    roots: z.array(int),
    feature: z.array(int.min(-1)),
    threshold: z.array(finite),
    left: z.array(int),
    right: z.array(int),
    value: z.array(finite),
    featureGain: z.array(finite),
  }),
  z.strictObject({ kind: z.literal('linear'), ...common, columns: z.array(int.min(0)).max(8), intercept: finite, coefficients: z.array(finite), shift: finite }),
  z.strictObject({ kind: z.literal('constant'), ...common, value: finite }),
]);
const artifactSchema = z.strictObject({
  format: z.literal(ARTIFACT_FORMAT),
  version: z.number(),
  featureNames: z.array(z.string().min(1)).min(1),
  quantile,
  model: modelSchema,
  training: z.strictObject({ numRows: int.min(1), options: z.record(z.string(), z.union([z.string(), finite, z.array(z.string())])) }),
  provenance: z.strictObject({
    runner: z.string(),
    modelSha256: z.string(),
    machine: z.string(),
    dataSha256: z.string(),
    command: z.string(),
    createdAt: z.string(),
  }),
});

/** Parses and validates artifact JSON text. */
export function parseArtifact(text: string): ArtifactLoad {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    return { ok: false, reason: `not JSON: ${(err as Error).message}` };
  }
  const version = (raw as { version?: unknown } | null)?.version;
  if (typeof raw === 'object' && raw !== null && (raw as { format?: unknown }).format === ARTIFACT_FORMAT && version !== ARTIFACT_VERSION) {
    return { ok: false, reason: `expected artifact version ${ARTIFACT_VERSION}, got ${String(version)} (retrain with this build)` };
  }
  const parsed = artifactSchema.safeParse(raw);
  if (!parsed.success) return { ok: false, reason: `malformed artifact:\n${z.prettifyError(parsed.error)}` };
  const a = parsed.data;
  const m = a.model;
  const problem = m.numFeatures !== a.featureNames.length
    ? `model has ${m.numFeatures} features but featureNames has ${a.featureNames.length}`
    : m.quantile !== a.quantile
      ? `model quantile ${m.quantile} differs from artifact quantile ${a.quantile}`
      : m.kind === 'gbdt' ? gbdtProblem(m) : m.kind === 'linear' ? linearProblem(m) : null;
  if (problem !== null) return { ok: false, reason: `malformed artifact: ${problem}` };
  const model: PredictorModel =
    m.kind === 'gbdt'
      ? {
          ...m,
          roots: Int32Array.from(m.roots),
          feature: Int32Array.from(m.feature),
          threshold: Float64Array.from(m.threshold),
          left: Int32Array.from(m.left),
          right: Int32Array.from(m.right),
          value: Float64Array.from(m.value),
          featureGain: Float64Array.from(m.featureGain),
        }
      : m;
  return { ok: true, artifact: { ...a, format: ARTIFACT_FORMAT, version: ARTIFACT_VERSION, model } };
}

type GbdtJson = Extract<z.infer<typeof modelSchema>, { kind: 'gbdt' }>;

function gbdtProblem(m: GbdtJson): string | null {
  const numNodes = m.feature.length;
  for (const name of ['threshold', 'left', 'right', 'value'] as const) {
    if (m[name].length !== numNodes) return `gbdt ${name} has ${m[name].length} entries, expected ${numNodes}`;
  }
  if (m.featureGain.length !== m.numFeatures) return `gbdt featureGain has ${m.featureGain.length} entries, expected ${m.numFeatures}`;
  for (const r of m.roots) if (r < 0 || r >= numNodes) return `gbdt root ${r} outside [0, ${numNodes})`;
  for (let k = 0; k < numNodes; k++) {
    const f = m.feature[k]!;
    if (f < 0) continue;
    if (f >= m.numFeatures) return `gbdt node ${k} splits on feature ${f}, expected < ${m.numFeatures}`;
    for (const child of [m.left[k]!, m.right[k]!]) {
      // Children point forward, so every walk from a root ends at a leaf.
      if (child <= k || child >= numNodes) return `gbdt node ${k} has child ${child}, expected in (${k}, ${numNodes})`;
    }
  }
  return null;
}

function linearProblem(m: Extract<z.infer<typeof modelSchema>, { kind: 'linear' }>): string | null {
  if (m.coefficients.length !== m.columns.length) return `linear model has ${m.coefficients.length} coefficients for ${m.columns.length} columns`;
  for (const c of m.columns) if (c >= m.numFeatures) return `linear column ${c}, expected < ${m.numFeatures}`;
  return null;
}

/** The provenance fields a loaded artifact must share with the running system. */
export type CheckedField = 'runner' | 'modelSha256' | 'machine' | 'featureNames';

export interface ProvenanceMismatch {
  readonly field: CheckedField;
  readonly artifact: string;
  readonly current: string;
}

/**
 * What differs between the artifact and the system about to use it (empty: it fits). Returned as
 * data: whether a mismatch refuses start-up or only warns is the caller's policy.
 */
export function checkArtifact(
  artifact: PredictorArtifact,
  current: { readonly runner: string; readonly modelSha256: string; readonly machine: string; readonly featureNames: readonly string[] },
): ProvenanceMismatch[] {
  const out: ProvenanceMismatch[] = [];
  for (const field of ['runner', 'modelSha256', 'machine'] as const) {
    if (artifact.provenance[field] !== current[field]) out.push({ field, artifact: artifact.provenance[field], current: current[field] });
  }
  const names = JSON.stringify(artifact.featureNames);
  if (names !== JSON.stringify(current.featureNames)) out.push({ field: 'featureNames', artifact: names, current: JSON.stringify(current.featureNames) });
  return out;
}
