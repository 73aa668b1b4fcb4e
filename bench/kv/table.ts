// The table of bench/kv/mixed-overload.sh: per run folder (RUNNER-ctxN/LABEL/RUN), completions per
// second inside the steady window (counted by when they END, so a backlog drained after the
// arrivals stop does not count), preemptions per completed request (from the server's /stats
// before and after the run), timeouts and E2E quantiles of completed requests. `vs capacity` is
// open-loop completed throughput / the closed-loop completed throughput of the reference
// configuration (`--reference PREFIX`, default `after`: labels PREFIX or PREFIX-N) on the same
// runner: the median over repeats, of the concurrency that completed most. A second table gives the median and range over repeats (labels LABEL-1, LABEL-2, ...).
//
//   node --import tsx bench/kv/table.ts [--reference after] results/kv-mixed-overload/*/*/*

import { readFileSync } from 'node:fs';
import path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';

interface Row {
  /** RUNNER-ctxN */
  readonly runner: string;
  /** LABEL without its -N repeat suffix */
  readonly config: string;
  readonly run: string;
  readonly loop: string;
  readonly offered: number;
  readonly completed: number;
  readonly throughput: number;
  readonly timeouts: number;
  readonly preemptions: number;
  readonly e2eP50: number;
  readonly e2eP90: number;
}

const args = process.argv.slice(2);
const refAt = args.indexOf('--reference');
const reference = refAt >= 0 ? args[refAt + 1] ?? 'after' : 'after';
const dirs = args.filter((d, i) => !d.startsWith('--') && !(refAt >= 0 && i === refAt + 1));
if (dirs.length === 0) throw new Error('usage: table.ts RUN_DIR...');
const db = await DuckDBInstance.create();
const con = await db.connect();
const rows: Row[] = [];
for (const dir of dirs) {
  const meta = JSON.parse(readFileSync(path.join(dir, 'meta.json'), 'utf8')) as { config: { durationS: number; warmupS: number; loop: string; rate: number } };
  const { durationS, warmupS, loop, rate } = meta.config;
  const stats = (f: string): number => (JSON.parse(readFileSync(path.join(dir, f), 'utf8')) as { engine: { scheduler: { numPreemptions: number } } }).engine.scheduler.numPreemptions;
  const file = path.join(dir, 'records.parquet').replaceAll("'", "''");
  const r = await con.runAndReadAll(`
    select count(*) filter (where outcome = 'ok' and end_ms >= ${warmupS * 1000} and end_ms <= ${durationS * 1000}) as in_window,
           count(*) filter (where outcome = 'ok') as ok,
           count(*) filter (where outcome = 'timeout') as timeouts,
           quantile_cont(e2e_ms, 0.5) filter (where outcome = 'ok') as p50,
           quantile_cont(e2e_ms, 0.9) filter (where outcome = 'ok') as p90
    from '${file}'`);
  const o = r.getRowObjectsJson()[0] as Record<string, string | number | null>;
  const ok = Number(o.ok);
  rows.push({
    runner: path.basename(path.dirname(path.dirname(dir))),
    config: path.basename(path.dirname(dir)).replace(/-\d+$/, ''),
    run: path.basename(dir),
    loop,
    offered: loop === 'open' ? rate : NaN,
    completed: ok,
    throughput: Number(o.in_window) / (durationS - warmupS),
    timeouts: Number(o.timeouts),
    preemptions: stats('stats-after.json') - stats('stats-before.json'),
    e2eP50: Number(o.p50 ?? NaN),
    e2eP90: Number(o.p90 ?? NaN),
  });
}
const median = (xs: readonly number[]): number => {
  const a = [...xs].sort((x, y) => x - y);
  const m = a.length >> 1;
  return a.length === 0 ? NaN : a.length % 2 === 1 ? a[m]! : (a[m - 1]! + a[m]!) / 2;
};
const capacity = new Map<string, number>();
for (const runner of new Set(rows.map((r) => r.runner))) {
  // With closed loops at several concurrencies, the best one's median (a low concurrency underuses the batch).
  const closed = rows.filter((r) => r.runner === runner && r.config === reference && r.loop === 'closed');
  const medians = [...new Set(closed.map((r) => r.run))].map((run) => median(closed.filter((r) => r.run === run).map((r) => r.throughput)));
  capacity.set(runner, Math.max(...medians));
}
const f = (x: number, d = 2): string => (Number.isFinite(x) ? x.toFixed(d) : '-');
const vsCapacity = (r: Row): number => (r.loop === 'open' ? r.throughput / (capacity.get(r.runner) ?? NaN) : NaN);
const perCompleted = (r: Row): number => (r.completed === 0 ? NaN : r.preemptions / r.completed);
console.log(`Capacity reference: the closed-loop completed rps of '${reference}' per runner (median over repeats, best concurrency): ${[...capacity].map(([k, v]) => `${k} ${f(v)}`).join(', ')}.\n`);
console.log('| runner | config | run | offered rps | completed | completed rps (in window) | vs capacity | timeouts | preemptions | preemptions / completed | E2E p50 s | E2E p90 s |');
console.log('|---|---|---|---|---|---|---|---|---|---|---|---|');
for (const r of rows) {
  console.log(`| ${r.runner} | ${r.config} | ${r.run} | ${f(r.offered, 1)} | ${r.completed} | ${f(r.throughput)} | ${f(vsCapacity(r))} | ${r.timeouts} | ${r.preemptions} | ${f(perCompleted(r))} | ${f(r.e2eP50 / 1000, 1)} | ${f(r.e2eP90 / 1000, 1)} |`);
}
const groups = new Map<string, Row[]>();
for (const r of rows) groups.set(`${r.runner}|${r.config}|${r.run}`, [...(groups.get(`${r.runner}|${r.config}|${r.run}`) ?? []), r]);
const mr = (xs: readonly number[]): string => (xs.length === 1 ? f(xs[0]!) : `${f(median(xs))} (${f(Math.min(...xs))}–${f(Math.max(...xs))})`);
console.log('\nMedian (range) over repeats:\n');
console.log('| runner | config | run | repeats | completed rps (in window) | vs capacity | preemptions / completed |');
console.log('|---|---|---|---|---|---|---|');
for (const [key, rs] of groups) {
  const [runner, config, run] = key.split('|');
  console.log(`| ${runner} | ${config} | ${run} | ${rs.length} | ${mr(rs.map((r) => r.throughput))} | ${rs[0]!.loop === 'open' ? mr(rs.map(vsCapacity)) : '-'} | ${mr(rs.map(perCompleted))} |`);
}
