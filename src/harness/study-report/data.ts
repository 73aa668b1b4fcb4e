// A ladder study as the report reads it: the index (ladder.json) for which runs exist and their
// provenance, and every number recomputed from each run's records.parquet (and, for rung 5, its
// admission trace), never copied from a summary — so any SLO can be applied afterwards and the
// report is a function of the committed data alone. Loading is deterministic: runs in plan order.
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { SensitivityRow, Summary } from '../report.ts';
import { sloSensitivity, summarize } from '../report.ts';
import { readRecords } from '../store.ts';
import type { LadderConfig } from '../ladder/config.ts';
import type { LadderRow } from '../ladder/index-file.ts';
import { INDEX_JSON, num, runDir } from '../ladder/index-file.ts';

/** Admission-trace coverage of one run: of admitted, finished requests with a bound, how many finished inside it. */
export interface Coverage {
  numAdmittedFinished: number;
  numViolations: number;
  sumBoundMs: number;
  sumActualMs: number;
}

export interface StudyRun {
  readonly row: LadderRow;
  /** Recomputed from records at the study SLO. */
  readonly summary: Summary;
  /** Goodput at the sensitivity SLOs (`sensitivitySlosMs`). */
  readonly sensitivity: SensitivityRow[];
  /** From the admission trace (rung 5), else null. */
  readonly coverage: Coverage | null;
}

export interface Study {
  /** The study folder as given (used in captions; never an absolute path in output). */
  readonly name: string;
  readonly config: LadderConfig;
  readonly rates: number[];
  readonly calibration: Record<string, unknown> | null;
  readonly command: string;
  readonly numPlanned: number;
  readonly runs: StudyRun[];
  readonly sensitivitySlosMs: number[];
}

interface IndexFile {
  command: string;
  config: LadderConfig;
  rates: number[];
  calibration: Record<string, unknown> | null;
  num_planned: number;
  rows: LadderRow[];
}

/** Reads the study in `dir`; throws a one-line error when it is not one. */
export async function loadStudy(dir: string, name = dir): Promise<Study> {
  const file = path.join(dir, INDEX_JSON);
  if (!existsSync(file)) throw new Error(`report: expected a ladder study (${INDEX_JSON}) in ${name}`);
  const index = JSON.parse(await readFile(file, 'utf8')) as IndexFile;
  const c = index.config;
  const sensitivitySlosMs = [0.5, 1, 2].map((m) => m * c.sloMs);
  const runs: StudyRun[] = [];
  for (const raw of index.rows) {
    if (raw.status !== 'ok') continue;
    const row = { ...raw, p99_e2e_ms: num(raw.p99_e2e_ms), p99_ttft_ms: num(raw.p99_ttft_ms) };
    const d = runDir(dir, row.run_id);
    const records = await readRecords(d);
    const windowS = c.durationS - c.warmupS;
    const summary = summarize(records, { sloMs: c.sloMs, windowS, timeoutMs: c.timeoutS * 1000 });
    const sensitivity = sloSensitivity(records, sensitivitySlosMs, windowS);
    const coverage = row.trace_file === null ? null : await readCoverage(path.join(d, row.trace_file));
    runs.push({ row, summary, sensitivity, coverage });
  }
  runs.sort((a, b) => a.row.index - b.row.index);
  return { name, config: c, rates: index.rates, calibration: index.calibration, command: index.command, numPlanned: index.num_planned, runs, sensitivitySlosMs };
}

async function readCoverage(file: string): Promise<Coverage | null> {
  if (!existsSync(file)) return null;
  const cov: Coverage = { numAdmittedFinished: 0, numViolations: 0, sumBoundMs: 0, sumActualMs: 0 };
  for (const line of (await readFile(file, 'utf8')).split('\n')) {
    if (line.trim() === '') continue;
    const t = JSON.parse(line) as { admitted: boolean; censored: boolean; bound_ms: number | null; e2e_ms: number | null };
    if (!t.admitted || t.censored || t.bound_ms === null || t.e2e_ms === null) continue;
    cov.numAdmittedFinished++;
    if (t.e2e_ms > t.bound_ms) cov.numViolations++;
    cov.sumBoundMs += t.bound_ms;
    cov.sumActualMs += t.e2e_ms;
  }
  return cov;
}

/** The runs of one (rung, rate) point, first repetition only (the anchor's second run is for drift). */
export function pointRuns(s: Study, rungId: string, rate: number): StudyRun[] {
  return s.runs.filter((r) => r.row.rung === rungId && r.row.rate === rate && r.row.rep === 1);
}

/** Rungs present in the study, in ladder order. */
export function studyRungs(s: Study): string[] {
  return s.config.rungs.filter((id) => s.runs.some((r) => r.row.rung === id));
}
