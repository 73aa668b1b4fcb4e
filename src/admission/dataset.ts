// Admission traces → a training matrix. Rows come from `--trace-out` files laid out by the
// collection script as <root>/round-<r>/rate-<x>/trace.jsonl; the round is the fold key: whole
// collection rounds go to whole folds (train / calibrate / test), never a time split inside a
// block — inside an overloaded block the queue only grows, so its tail is a different
// distribution from its head (the reference's coverage fell to 0.34 that way).
//
// Censored rows (aborted, failed) and refusals are dropped: a timeout is a lower bound on latency,
// and training on it teaches the model that the worst case is the client's timeout.

import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { FEATURE_NAMES, NUM_FEATURES } from './features.ts';
import type { TraceRow } from './trace-writer.ts';
import { TRACE_VERSION } from './trace-writer.ts';

export type Target = 'e2e' | 'ttft';

export interface Dataset {
  readonly featureNames: readonly string[];
  /** Row-major, NUM_FEATURES per row. */
  readonly x: Float64Array;
  /** Observed latency, ms. */
  readonly y: Float64Array;
  /** Fold key of each row: its block, `<round>/<rate>` (whole rounds go to whole folds; a block is the finest unit). */
  readonly group: readonly string[];
  /** The collection round of each row. */
  readonly round: readonly string[];
  /** Offered rate of each row's block (for reports), or NaN. */
  readonly rate: Float64Array;
  readonly numRows: number;
  /** Rows read, and dropped as censored or refused. */
  readonly numRead: number;
  readonly numDropped: number;
}

/** The trace files under `root`, each with its round and rate taken from the path. */
export function findTraces(root: string): { path: string; round: string; rate: number }[] {
  const out: { path: string; round: string; rate: number }[] = [];
  const walk = (dir: string, round: string, rate: number): void => {
    for (const name of readdirSync(dir).sort()) {
      const p = join(dir, name);
      if (statSync(p).isDirectory()) {
        const r = /^round-(.+)$/.exec(name);
        const x = /^rate-([0-9.]+)$/.exec(name);
        walk(p, r !== null ? r[1]! : round, x !== null ? Number(x[1]) : rate);
      } else if (name.endsWith('.jsonl')) out.push({ path: p, round, rate });
    }
  };
  walk(root, 'all', Number.NaN);
  return out;
}

/** Parse trace rows (one JSON object per line); a malformed line is an error naming it. */
export function parseTrace(text: string, source: string): TraceRow[] {
  const rows: TraceRow[] = [];
  text.split('\n').forEach((line, i) => {
    if (line.trim() === '') return;
    let r: TraceRow;
    try {
      r = JSON.parse(line) as TraceRow;
    } catch (e) {
      throw new Error(`${source}:${i + 1}: not JSON (${(e as Error).message})`);
    }
    if (r.v !== TRACE_VERSION) throw new Error(`${source}:${i + 1}: trace version ${String(r.v)}, expected ${TRACE_VERSION}`);
    rows.push(r);
  });
  return rows;
}

/**
 * What to do with censored rows (cancelled, timed out, failed: the latency recorded is the time they
 * were cut at, a lower bound). 'drop' for fitting a predictor, which must not learn a lower bound as
 * an observed latency; 'keep' for calibrating a bound, where dropping them breaks exchangeability
 * (the slowest requests are the ones clients give up on: 507 of 1,267 rows of one collection) and a
 * row cut past its budget is a miss at its censoring time whatever its true latency.
 */
export type CensoredRows = 'drop' | 'keep';

/** Build the matrix from rows (each tagged with its fold key and rate). */
export function toDataset(tagged: readonly { row: TraceRow; round: string; rate: number }[], target: Target, censored: CensoredRows = 'drop'): Dataset {
  const keep = tagged.filter(({ row }) => row.admitted && (censored === 'keep' || !row.censored) && (target === 'e2e' ? row.e2e_ms : row.ttft_ms) !== null);
  const x = new Float64Array(keep.length * NUM_FEATURES);
  const y = new Float64Array(keep.length);
  const rate = new Float64Array(keep.length);
  keep.forEach(({ row, rate: r }, i) => {
    FEATURE_NAMES.forEach((name, j) => {
      const v = row.features[name];
      if (typeof v !== 'number' || !Number.isFinite(v)) throw new Error(`trace row ${row.request_id}: feature ${name} is ${String(v)}`);
      x[i * NUM_FEATURES + j] = v;
    });
    y[i] = (target === 'e2e' ? row.e2e_ms : row.ttft_ms)!;
    rate[i] = r;
  });
  return { featureNames: FEATURE_NAMES, x, y, group: keep.map((k) => `${k.round}/${k.rate}`), round: keep.map((k) => k.round), rate, numRows: keep.length, numRead: tagged.length, numDropped: tagged.length - keep.length };
}

/** The block keys of the given rounds (for a fold plan). */
export function blocksOf(ds: Dataset, rounds: readonly string[]): string[] {
  const want = new Set(rounds);
  return [...new Set(ds.group.filter((_, i) => want.has(ds.round[i]!)))];
}

/** Every trace under `root` as one dataset. */
export function loadDataset(root: string, target: Target, censored: CensoredRows = 'drop'): Dataset {
  const tagged = findTraces(root).flatMap(({ path, round, rate }) => parseTrace(readFileSync(path, 'utf8'), path).map((row) => ({ row, round, rate })));
  return toDataset(tagged, target, censored);
}
