// Embeds a ladder study's generated tables into docs/ between marker comments, regenerating each
// from the study's data (not copying report/tables/), so `--check` proves that what docs/ says is
// what the committed data says:
//
//   <!-- embed-table: results/ladder/mock-smoke#ladder -->
//   ...generated, do not edit...
//   <!-- /embed-table -->
//
// The study path is relative to the working directory (the repository root); the part after '#'
// is a table id (report/tables/<id>.md). Exit 0: up to date (or rewritten); exit 1 (--check): a
// table differs from its data, named on stderr; exit 2: a marker is malformed or names no study.
//
//   node --import tsx scripts/embed-tables.ts [--check] [FILE.md ...]   (default: docs/*.md)
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { loadStudy } from '../src/harness/study-report/data.ts';
import { studyTables } from '../src/harness/study-report/write.ts';
import { tableMarkdown } from '../src/harness/study-report/table.ts';

const BLOCK = /(<!-- embed-table: ([^#\s]+)#([\w-]+) -->\n)([\s\S]*?)(<!-- \/embed-table -->)/g;

/** Rewrites every marked block of `text`; returns the new text and the blocks that changed. */
export async function embed(text: string, tablesOf: (study: string) => Promise<Map<string, string>>): Promise<{ text: string; changed: string[] }> {
  const changed: string[] = [];
  const parts: string[] = [];
  let last = 0;
  for (const m of text.matchAll(BLOCK)) {
    const [whole, open, study, id, body, close] = m as unknown as [string, string, string, string, string, string];
    const tables = await tablesOf(study);
    const want = tables.get(id);
    if (want === undefined) throw new Error(`embed-tables: ${study} has no table '${id}' (it has ${[...tables.keys()].join(', ')})`);
    if (body !== want) changed.push(`${study}#${id}`);
    parts.push(text.slice(last, m.index), open, want, close);
    last = m.index + whole.length;
  }
  parts.push(text.slice(last));
  return { text: parts.join(''), changed };
}

async function main(): Promise<number> {
  const { values, positionals } = parseArgs({ options: { check: { type: 'boolean', default: false } }, allowPositionals: true });
  const files = positionals.length > 0 ? positionals : readdirSync('docs').filter((f) => f.endsWith('.md')).sort().map((f) => path.join('docs', f));
  const cache = new Map<string, Map<string, string>>();
  const tablesOf = async (study: string): Promise<Map<string, string>> => {
    let t = cache.get(study);
    if (t === undefined) {
      t = new Map(studyTables(await loadStudy(study, study)).map((x) => [x.id, tableMarkdown(x)]));
      cache.set(study, t);
    }
    return t;
  };
  let stale = 0;
  for (const file of files) {
    const before = readFileSync(file, 'utf8');
    const { text, changed } = await embed(before, tablesOf);
    if (changed.length === 0) continue;
    if (values.check) {
      for (const c of changed) process.stderr.write(`embed-tables: ${file}: the table ${c} no longer matches its data (run: node --import tsx scripts/embed-tables.ts)\n`);
      stale += changed.length;
    } else {
      writeFileSync(file, text);
      process.stderr.write(`embed-tables: ${file}: updated ${changed.join(', ')}\n`);
    }
  }
  return stale > 0 ? 1 : 0;
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  main().then(
    (code) => {
      process.exitCode = code;
    },
    (err: unknown) => {
      process.stderr.write(`${(err as Error).message}\n`);
      process.exitCode = 2;
    },
  );
}
