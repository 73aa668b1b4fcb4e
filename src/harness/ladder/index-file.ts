// The study's index: one row per run, `ladder.json` (with the plan and provenance) and
// `ladder.csv` (the same rows, flat). Each run writes its own `row.json` as the very last file of
// its folder; the index is rebuilt from those after every run, so it never disagrees with what is
// on disk, and a run without a row.json is, by definition, not done (a resumed study redoes it).
import { existsSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { PlannedRun } from './plan.ts';

export const RUNS_DIR = 'runs';
export const ROW_FILE = 'row.json';
export const INDEX_JSON = 'ladder.json';
export const INDEX_CSV = 'ladder.csv';

/** One run's line in the index. Latencies in ms, rates in req/s; summary numbers at the study SLO. */
export interface LadderRow {
  run_id: string;
  index: number;
  block: number;
  position: number;
  rung: string;
  rep: number;
  rate: number;
  seed: number;
  /** 'ok', or 'failed' (the server did not start, the run threw); failed rows are redone on resume. */
  status: 'ok' | 'failed';
  error: string | null;
  started_at: string;
  finished_at: string;
  wall_s: number;
  /** The fixed probe's median latency on the idle server before the run (probe.ts). */
  probe_ms: number | null;
  loadavg_before: number[];
  loadavg_after: number[];
  git_commit: string | null;
  git_dirty: boolean | null;
  machine: string;
  num_arrivals: number;
  completed: number;
  num_shed: number;
  num_timeouts: number;
  goodput_rps: number;
  throughput_rps: number;
  slo_attainment: number;
  slo_attainment_admitted: number;
  shed_rate: number;
  p50_ttft_ms: number;
  p99_ttft_ms: number;
  p50_e2e_ms: number;
  p99_e2e_ms: number;
  generator_valid: boolean;
  /** Admission trace (rung 5), relative to the run folder, else null. */
  trace_file: string | null;
}

const CSV_COLUMNS: ReadonlyArray<keyof LadderRow> = [
  'run_id', 'index', 'block', 'position', 'rung', 'rep', 'rate', 'seed', 'status', 'error', 'started_at', 'finished_at', 'wall_s',
  'probe_ms', 'loadavg_before', 'loadavg_after', 'git_commit', 'git_dirty', 'machine', 'num_arrivals', 'completed', 'num_shed',
  'num_timeouts', 'goodput_rps', 'throughput_rps', 'slo_attainment', 'slo_attainment_admitted', 'shed_rate', 'p50_ttft_ms',
  'p99_ttft_ms', 'p50_e2e_ms', 'p99_e2e_ms', 'generator_valid', 'trace_file',
];

/** Complete: a row saying 'ok'. Anything else (no row, a failed run) is redone on resume. */
export const isComplete = (row: LadderRow | null): boolean => row?.status === 'ok';

export const runDir = (studyDir: string, runId: string): string => path.join(studyDir, RUNS_DIR, runId);

/** The row a run wrote last, or null when the run is missing or half-written. */
export async function readRow(studyDir: string, runId: string): Promise<LadderRow | null> {
  const file = path.join(runDir(studyDir, runId), ROW_FILE);
  if (!existsSync(file)) return null;
  const row = JSON.parse(await readFile(file, 'utf8')) as LadderRow;
  for (const k of ['p50_ttft_ms', 'p99_ttft_ms', 'p50_e2e_ms', 'p99_e2e_ms', 'slo_attainment', 'slo_attainment_admitted', 'shed_rate'] as const) row[k] = num(row[k]);
  return row;
}

const csvCell = (v: unknown): string => {
  const s = Array.isArray(v) ? v.join(' ') : typeof v === 'number' || typeof v === 'boolean' || typeof v === 'string' ? String(v) : '';
  return /[",\n]/.test(s) ? `"${s.replaceAll('"', '""')}"` : s;
};

/** Rewrites ladder.json and ladder.csv from every run folder that has a row, in plan order. */
export async function rebuildIndex(studyDir: string, runs: readonly PlannedRun[], header: Record<string, unknown>): Promise<LadderRow[]> {
  const rows: LadderRow[] = [];
  for (const r of runs) {
    const row = await readRow(studyDir, r.runId);
    if (row !== null) rows.push(row);
  }
  // JSON has no Infinity: a censored p99 is written as the string "Infinity" and read back by the report.
  const json = JSON.stringify({ ...header, num_planned: runs.length, num_done: rows.filter((r) => r.status === 'ok').length, rows }, (_k, v: unknown) => (typeof v === 'number' && !Number.isFinite(v) ? String(v) : v), 2);
  await writeFile(path.join(studyDir, INDEX_JSON), json + '\n');
  await writeFile(path.join(studyDir, INDEX_CSV), [CSV_COLUMNS.join(','), ...rows.map((row) => CSV_COLUMNS.map((c) => csvCell(row[c])).join(','))].join('\n') + '\n');
  return rows;
}

/** JSON with non-finite numbers as strings ("Infinity": a p99 above the client timeout). */
export function stringifyRow(row: LadderRow): string {
  return JSON.stringify(row, (_k, v: unknown) => (typeof v === 'number' && !Number.isFinite(v) ? String(v) : v), 2) + '\n';
}

/** A number as the index stores it: "Infinity"/"NaN" strings back to numbers. */
export function num(v: unknown): number {
  return typeof v === 'number' ? v : typeof v === 'string' ? Number(v) : NaN;
}
