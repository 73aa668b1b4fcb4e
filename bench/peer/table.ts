// Side-by-side tables for docs/benchmarks.md, regenerated from committed result folders only:
// the headline numbers come from `headroom bench report --json` (one call per folder, so the
// numbers are the harness's own), and failures by kind from records.parquet (steady rows):
// HTTP status, transport errors, client timeouts, and llama-server's mid-stream
// "Context size has been exceeded" (which the harness records as a transport error).
//
//   node --import tsx bench/peer/table.ts --slo 4000 results/peer/rate-*/*  > table.md
//   node --import tsx bench/peer/table.ts --slo 4000 --json results/ladder/first-run/rate-*/*

import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { DuckDBInstance } from '@duckdb/node-api';

const { values, positionals } = parseArgs({
  options: { slo: { type: 'string', default: '4000' }, json: { type: 'boolean', default: false } },
  allowPositionals: true,
});
const sloMs = Number(values.slo);
if (!(sloMs > 0)) throw new Error(`expected --slo > 0, got ${values.slo}`);
const bin = path.join(import.meta.dirname, '..', '..', 'bin', 'headroom.mjs');

/** The subset of the report's JSON (vLLM bench-serve key names) these tables show. */
interface Report {
  offered_rate: number;
  request_throughput: number;
  request_goodput: number;
  slo_attainment: number;
  num_arrivals: number;
  completed: number;
  median_ttft_ms: number | string;
  p99_ttft_ms: number | string;
  p99_itl_ms: number | string;
  p99_e2el_ms: number | string;
  generator_validation: { valid: boolean; slip_p99_ms: number };
}

interface Failures {
  /** Steady rows by outcome other than ok, plus HTTP statuses and the context-exceeded count. */
  readonly byKind: Record<string, number>;
  /** The longest gap between two streamed chunks of any steady request (ms): the worst stall. */
  readonly maxItlMs: number;
}

interface Row {
  readonly dir: string;
  readonly config: string;
  readonly rate: string;
  readonly report: Report;
  readonly failures: Failures;
  readonly load: string;
}

async function failuresOf(dir: string): Promise<Failures> {
  const db = await DuckDBInstance.create(':memory:');
  const conn = await db.connect();
  const file = path.join(dir, 'records.parquet').replaceAll("'", "''");
  const reader = await conn.runAndReadAll(`
    SELECT CASE
             WHEN error LIKE '%Context size has been exceeded%' THEN 'ctx_exceeded'
             WHEN outcome = 'http_error' OR outcome = 'shed' THEN 'http_' || CAST(http_status AS VARCHAR)
             ELSE outcome END AS kind,
           COUNT(*)::INTEGER AS n
    FROM read_parquet('${file}') WHERE phase = 'steady' AND outcome <> 'ok' GROUP BY 1 ORDER BY 1`);
  const byKind: Record<string, number> = {};
  for (const [kind, n] of reader.getRows()) byKind[String(kind)] = Number(n);
  const itl = await conn.runAndReadAll(`SELECT max(list_max(itl_ms)) FROM read_parquet('${file}') WHERE phase = 'steady'`);
  const maxItlMs = Number(itl.getRows()[0]?.[0] ?? NaN);
  conn.closeSync();
  db.closeSync();
  return { byKind, maxItlMs };
}

function loadOf(dir: string): string {
  try {
    return readFileSync(path.join(dir, 'loadavg.txt'), 'utf8').trim().split('\n').map((l) => l.split(' ')[1]).join('→');
  } catch {
    return '?';
  }
}

const fmt = (x: number | string, digits = 0): string => (typeof x === 'number' && Number.isFinite(x) ? x.toFixed(digits) : String(x));
/** ms as text; the report writes a censored quantile (above the client timeout) as Infinity. */
const fmtMs = (x: number | string): string => {
  if (x === Infinity || x === 'Infinity') return '>timeout';
  if (typeof x !== 'number' || !Number.isFinite(x)) return String(x);
  return x >= 10_000 ? `${(x / 1000).toFixed(1)} s` : x.toFixed(0);
};

const rows: Row[] = [];
for (const dir of positionals) {
  const out = execFileSync(process.execPath, [bin, 'bench', 'report', dir, '--slo', String(sloMs), '--json'], { encoding: 'utf8' });
  const report = JSON.parse(out) as Report;
  rows.push({ dir, config: path.basename(dir), rate: path.basename(path.dirname(dir)).replace(/^rate-/, ''), report, failures: await failuresOf(dir), load: loadOf(dir) });
}
rows.sort((a, b) => Number(a.rate) - Number(b.rate) || a.config.localeCompare(b.config));

if (values.json) {
  console.log(JSON.stringify(rows, null, 2));
} else {
  console.log(`SLO ${sloMs} ms (E2E). Steady-window rows only. ITL/E2E/TTFT in ms; a censored (timed-out) row counts as +∞ in quantiles.\n`);
  console.log('| rate (rps) | config | offered | throughput | **goodput** | SLO att. | p99 E2E | p99 ITL | max ITL | TTFT p50 | TTFT p99 | failures (steady) | load 1m | gen. valid |');
  console.log('|---|---|---|---|---|---|---|---|---|---|---|---|---|---|');
  for (const r of rows) {
    const f = Object.entries(r.failures.byKind).map(([k, n]) => `${k} ${n}`).join(', ') || '0';
    const m = r.report;
    console.log(`| ${r.rate} | ${r.config} | ${fmt(m.offered_rate, 2)} | ${fmt(m.request_throughput, 2)} | **${fmt(m.request_goodput, 2)}** | ${fmt(m.slo_attainment * 100, 0)}% | ${fmtMs(m.p99_e2el_ms)} | ${fmtMs(m.p99_itl_ms)} | ${fmtMs(r.failures.maxItlMs)} | ${fmtMs(m.median_ttft_ms)} | ${fmtMs(m.p99_ttft_ms)} | ${f} | ${r.load} | ${m.generator_validation.valid ? 'yes' : `no (slip p99 ${fmt(m.generator_validation.slip_p99_ms, 1)} ms)`} |`);
  }
}
