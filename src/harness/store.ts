// Results on disk: one folder per run.
//   schedule.parquet  the arrival realisation and workload draws, written *before* the run
//   records.parquet   one row per request (record.ts), written after it
//   meta.json         provenance: source hash, full config, seed, machine probe, the generator's
//                     own validation (KS, slip), the target's /stats
// Parquet goes through DuckDB: rows are streamed to a newline-delimited JSON file and DuckDB
// COPYs it with an explicit schema, so column types never depend on what the first row held.
import { createWriteStream } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile, mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import type { RequestRecord } from './record.ts';
import { RECORD_COLUMNS } from './record.ts';

export const RECORDS_FILE = 'records.parquet';
export const SCHEDULE_FILE = 'schedule.parquet';
export const META_FILE = 'meta.json';

export const SCHEDULE_COLUMNS: ReadonlyArray<readonly [string, string]> = [
  ['request_id', 'INTEGER'],
  ['intended_ms', 'DOUBLE'],
  ['klass', 'VARCHAR'],
  ['prefix_id', 'INTEGER'],
  ['prompt_tokens_est', 'INTEGER'],
  ['prompt_chars', 'INTEGER'],
  ['max_tokens', 'INTEGER'],
];

const sqlString = (s: string): string => `'${s.replaceAll("'", "''")}'`;

/** Writes rows to a Parquet file with exactly `columns` (name, DuckDB type). */
export async function writeParquet(
  file: string,
  columns: ReadonlyArray<readonly [string, string]>,
  rows: Iterable<object>,
): Promise<void> {
  await mkdir(path.dirname(file), { recursive: true });
  const dir = await mkdtemp(path.join(tmpdir(), 'headroom-bench-'));
  const jsonl = path.join(dir, 'rows.jsonl');
  try {
    const out = createWriteStream(jsonl);
    for (const row of rows) {
      if (!out.write(JSON.stringify(row) + '\n')) await new Promise<void>((r) => out.once('drain', () => r()));
    }
    await new Promise<void>((resolve, reject) => out.end((err?: Error | null) => (err ? reject(err) : resolve())));
    const cols = columns.map(([n, t]) => `${n}: ${sqlString(t)}`).join(', ');
    const names = columns.map(([n]) => n).join(', ');
    await withDuckDb(async (run) => {
      await run(
        `COPY (SELECT ${names} FROM read_json(${sqlString(jsonl)}, format = 'newline_delimited', columns = {${cols}})) ` +
          `TO ${sqlString(file)} (FORMAT parquet)`,
      );
    });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Reads a Parquet file into plain JS objects. */
export async function readParquet(file: string): Promise<Array<Record<string, unknown>>> {
  return withDuckDb(async (_run, all) => all(`SELECT * FROM read_parquet(${sqlString(file)})`));
}

export async function writeRecords(dir: string, records: readonly RequestRecord[]): Promise<void> {
  await writeParquet(path.join(dir, RECORDS_FILE), RECORD_COLUMNS, records);
}

export async function readRecords(dir: string): Promise<RequestRecord[]> {
  const rows = await readParquet(path.join(dir, RECORDS_FILE));
  return rows.map((r) => ({ ...r, itl_ms: Array.isArray(r['itl_ms']) ? (r['itl_ms'] as number[]) : [] }) as unknown as RequestRecord);
}

export async function writeMeta(dir: string, meta: object): Promise<void> {
  await mkdir(dir, { recursive: true });
  await writeFile(path.join(dir, META_FILE), JSON.stringify(meta, null, 2) + '\n');
}

export async function readMeta(dir: string): Promise<Record<string, unknown>> {
  return JSON.parse(await readFile(path.join(dir, META_FILE), 'utf8')) as Record<string, unknown>;
}

type Run = (sql: string) => Promise<void>;
type All = (sql: string) => Promise<Array<Record<string, unknown>>>;

async function withDuckDb<T>(fn: (run: Run, all: All) => Promise<T>): Promise<T> {
  const instance = await DuckDBInstance.create(':memory:');
  const con = await instance.connect();
  try {
    return await fn(
      async (sql) => {
        await con.run(sql);
      },
      async (sql) => (await con.runAndReadAll(sql)).getRowObjectsJS(),
    );
  } finally {
    con.closeSync();
    instance.closeSync();
  }
}
