// The study's evidence tables as CSV (RFC 4180): a fixed header per file, one row per record.
// A field holding a comma, a quote or a line break is quoted, quotes doubled; null and NaN are
// empty; numbers are written as JavaScript prints them (no rounding: the report rounds, the file
// keeps what was measured). readCsv inverts writeCsv, so the report and the tests read back
// exactly what the study wrote.
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';

export type Cell = string | number | boolean | null;

/** One table: its column names, in file order, and rows keyed by them. */
export interface Table<C extends string = string> {
  readonly columns: readonly C[];
  readonly rows: ReadonlyArray<Readonly<Record<C, Cell>>>;
}

function field(v: Cell): string {
  if (v === null || (typeof v === 'number' && Number.isNaN(v))) return '';
  const s = String(v);
  return /[",\r\n]/.test(s) ? `"${s.replaceAll('"', '""')}"` : s;
}

export function formatCsv<C extends string>(t: Table<C>): string {
  const lines = [t.columns.map(field).join(',')];
  for (const row of t.rows) lines.push(t.columns.map((c) => field(row[c])).join(','));
  return lines.join('\n') + '\n';
}

export async function writeCsv<C extends string>(file: string, t: Table<C>): Promise<void> {
  await mkdir(path.dirname(file), { recursive: true });
  await writeFile(file, formatCsv(t));
}

/** Parses CSV text into a header and rows of strings (empty fields are ''). */
export function parseCsv(text: string): { header: string[]; rows: Array<Record<string, string>> } {
  const records: string[][] = [];
  let rec: string[] = [];
  let cur = '';
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i];
    if (quoted) {
      if (ch === '"' && text[i + 1] === '"') {
        cur += '"';
        i++;
      } else if (ch === '"') quoted = false;
      else cur += ch;
    } else if (ch === '"') quoted = true;
    else if (ch === ',') {
      rec.push(cur);
      cur = '';
    } else if (ch === '\n') {
      rec.push(cur);
      records.push(rec);
      rec = [];
      cur = '';
    } else if (ch !== '\r') cur += ch;
  }
  if (cur !== '' || rec.length > 0) {
    rec.push(cur);
    records.push(rec);
  }
  const header = records.shift() ?? [];
  return { header, rows: records.map((r) => Object.fromEntries(header.map((h, i) => [h, r[i] ?? '']))) };
}

export async function readCsv(file: string): Promise<{ header: string[]; rows: Array<Record<string, string>> }> {
  return parseCsv(await readFile(file, 'utf8'));
}

/** A numeric CSV field: NaN when empty. */
export function num(s: string | undefined): number {
  return s === undefined || s === '' ? NaN : Number(s);
}
