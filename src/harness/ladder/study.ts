// `headroom ladder`: one ablation study, end to end (docs/ladder.md).
//
//   1. plan.json: the config, the rate grid and the run order. A natural-length workload first
//      learns the model's EOS from a server of the study (eos-probe.ts: its requests carry it). A closed-loop calibration (labelled
//      closed loop everywhere: it measures what the anchor rung can complete, not latency under
//      arrivals) gives the capacity the grid is scaled from, unless rates are given.
//   2. arrivals/: every (rate, seed) schedule and its digest, before the first run (arrivals.ts).
//   3. runs/<rate>/<seed>/<rung>/: per run, in plan order (plan.ts): load average, a fresh
//      `headroom serve`, the fixed probe (probe.ts), one open-loop harness run (records.parquet,
//      schedule.parquet, meta.json), the server stopped, load average again, then row.json last.
//   4. ladder.json / ladder.csv rebuilt from the rows after every run (index-file.ts).
//
// Resumable: a run whose row.json says ok is skipped; any other run folder is deleted and redone.
// Re-running with different settings against an existing study is refused (config.ts). Every
// server start is appended to events.jsonl (a test counts them).
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { appendFile, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { summarize } from '../report.ts';
import type { GeneratorValidation } from '../run.ts';
import { resolveModel, runBench, withEos } from '../run.ts';
import { machineProbe, sourceInfo } from '../provenance.ts';
import type { ServeChild } from '../serve-child.ts';
import { REPO_ROOT, startServe } from '../serve-child.ts';
import { verifyArrivals, writeArrivals } from './arrivals.ts';
import type { LadderConfig } from './config.ts';
import { benchConfigFor, serveArgsFor, validateLadderConfig } from './config.ts';
import type { LadderRow } from './index-file.ts';
import { isComplete, readRow, rebuildIndex, runDir, stringifyRow } from './index-file.ts';
import type { PlannedRun } from './plan.ts';
import { ANCHOR_RUNG_ID, planRuns, rateGrid, rungById } from './plan.ts';
import { runProbe } from './probe.ts';
import type { EosTarget } from '../natural-length.ts';
import { isNaturalWorkload } from '../workloads.ts';

export const PLAN_FILE = 'plan.json';
export const EVENTS_FILE = 'events.jsonl';
const TRACE_FILE = 'admission-trace.jsonl';

export interface StudyHooks {
  /** Called once the plan is known, before the first run. */
  onStart?: (info: { numDone: number; numPlanned: number }) => void;
  /** Called after each run (done or skipped) with how many are complete and the ETA in seconds. */
  onRun?: (info: { numDone: number; numPlanned: number; etaS: number | null; run: PlannedRun; skipped: boolean; row: LadderRow | null }) => void;
  log?: (line: string) => void;
  /** The command line that started the study, recorded in plan.json. */
  command?: string;
}

interface Plan {
  tool: 'headroom ladder';
  config: LadderConfig;
  /** A natural-length workload's EOS token and vocabulary, learned from the study's own server before anything else; null otherwise (absent in older plans). */
  eos?: EosTarget | null;
  calibration: Record<string, unknown> | null;
  rates: number[];
  runs: PlannedRun[];
  command: string;
}

/** Runs (or resumes) the study in `studyDir`; resolves with the index rows. */
export async function runLadder(config: LadderConfig, studyDir: string, hooks: StudyHooks = {}): Promise<LadderRow[]> {
  validateLadderConfig(config);
  for (const id of config.rungs) rungById(id);
  const log = hooks.log ?? (() => {});
  await mkdir(studyDir, { recursive: true });
  // Keys live for this process only; they are never written anywhere.
  const keys = { user: randomBytes(18).toString('hex'), operator: randomBytes(18).toString('hex') };
  const env = { HEADROOM_API_KEYS: `${keys.user} ladder user;${keys.operator} ladder-probe operator` };
  const plan = await loadOrMakePlan(config, studyDir, env, keys.user, hooks.command ?? '', log);

  const header = { tool: 'headroom ladder', command: plan.command, config, rates: plan.rates, calibration: plan.calibration, source: sourceInfo() };
  let rows = await rebuildIndex(studyDir, plan.runs, header);
  const wallsS: number[] = [];
  let numDone = rows.filter((r) => r.status === 'ok').length;
  hooks.onStart?.({ numDone, numPlanned: plan.runs.length });
  for (const run of plan.runs) {
    const existing = await readRow(studyDir, run.runId);
    if (isComplete(existing)) {
      hooks.onRun?.({ numDone, numPlanned: plan.runs.length, etaS: eta(wallsS, plan.runs.length - numDone), run, skipped: true, row: existing });
      continue;
    }
    const t0 = performance.now();
    const row = await runOne(config, studyDir, run, env, keys, plan.eos ?? null);
    wallsS.push((performance.now() - t0) / 1000);
    if (row.status === 'ok') numDone++;
    else log(`ladder: ${run.runId} failed: ${row.error ?? ''}`);
    rows = await rebuildIndex(studyDir, plan.runs, header);
    hooks.onRun?.({ numDone, numPlanned: plan.runs.length, etaS: eta(wallsS, plan.runs.length - numDone), run, skipped: false, row });
  }
  return rows;
}

/** Seconds left at the mean wall time of the runs done in this invocation. */
function eta(wallsS: readonly number[], numLeft: number): number | null {
  if (wallsS.length === 0) return null;
  return (wallsS.reduce((a, b) => a + b, 0) / wallsS.length) * numLeft;
}

async function loadOrMakePlan(config: LadderConfig, studyDir: string, env: Record<string, string>, userKey: string, command: string, log: (l: string) => void): Promise<Plan> {
  const file = path.join(studyDir, PLAN_FILE);
  if (existsSync(file)) {
    const plan = JSON.parse(await readFile(file, 'utf8')) as Plan;
    if (JSON.stringify(plan.config) !== JSON.stringify(config)) {
      throw new Error(`ladder: ${studyDir} was planned with other settings (see its ${PLAN_FILE}); resume with the same flags or choose a new --out`);
    }
    log(`ladder: resuming ${studyDir} (${plan.runs.length} runs planned)`);
    return plan;
  }
  // A natural-length request carries the model's EOS in its logit bias, so the arrivals cannot be drawn before it is known.
  const eos = isNaturalWorkload(config.workload) ? await learnEos(config, studyDir, env, userKey, log) : null;
  let calibration: Record<string, unknown> | null = null;
  let rates = config.rates === null ? null : [...config.rates].sort((a, b) => a - b);
  if (rates === null) {
    calibration = await calibrate(config, studyDir, env, userKey, eos, log);
    rates = rateGrid(calibration['capacity_rps'] as number, config.gridMultipliers);
  }
  const runs = planRuns(config.rungs, rates, config.seeds);
  // The arrival realisations go to disk before the plan does: a plan on disk means its arrivals are too.
  await writeArrivals(studyDir, rates.flatMap((rate) => config.seeds.map((seed) => ({ rate, seed, bench: benchConfigFor(config, 'http://127.0.0.1:1', rate, seed, {}, eos) }))));
  const plan: Plan = { tool: 'headroom ladder', config, eos, calibration, rates, runs, command };
  await writeFile(file, JSON.stringify(plan, null, 2) + '\n');
  log(`ladder: planned ${runs.length} runs at ${rates.join(', ')} req/s in ${studyDir}`);
  return plan;
}

/** The served model's EOS token and vocabulary, probed over HTTP (run.ts withEos) on a server of the study's first rung, then stopped. */
async function learnEos(config: LadderConfig, studyDir: string, env: Record<string, string>, userKey: string, log: (l: string) => void): Promise<EosTarget> {
  const dir = path.join(studyDir, 'eos-probe');
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir, { recursive: true });
  await appendEvent(studyDir, { event: 'server-start', run: 'eos-probe' });
  const server = await startServe(serveArgsFor(config, rungById(config.rungs[0] ?? ANCHOR_RUNG_ID).serveFlags, null), path.join(dir, 'server.log'), env);
  try {
    const bench = benchConfigFor(config, server.url, 1, 0, { authorization: `Bearer ${userKey}` }, null);
    const learned = await withEos(bench, await resolveModel(bench));
    if (typeof learned === 'string' || learned.eos === undefined) throw new Error(`ladder: ${typeof learned === 'string' ? learned : 'no EOS learned'}`);
    log(`ladder: ${config.workload}: EOS token ${learned.eos.eosTokenId} of ${learned.eos.vocabSize}, from the server`);
    return learned.eos;
  } finally {
    await server.stop();
  }
}

/**
 * CLOSED LOOP capacity calibration on the anchor rung (or the last rung without admission in the
 * study): `parallel` workers, so the batch is full; capacity = completed requests per second.
 */
async function calibrate(config: LadderConfig, studyDir: string, env: Record<string, string>, userKey: string, eos: EosTarget | null, log: (l: string) => void): Promise<Record<string, unknown>> {
  const plain = config.rungs.filter((id) => rungById(id).guarantee === null);
  const rungId = plain.includes(ANCHOR_RUNG_ID) ? ANCHOR_RUNG_ID : (plain.at(-1) ?? ANCHOR_RUNG_ID);
  const dir = path.join(studyDir, 'calibration');
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir, { recursive: true });
  log(`ladder: closed-loop calibration on ${rungId}, ${config.parallel} workers, ${config.calibrationS} s`);
  await appendEvent(studyDir, { event: 'server-start', run: 'calibration' });
  const server = await startServe(serveArgsFor(config, rungById(rungId).serveFlags, null), path.join(dir, 'server.log'), env);
  try {
    const bench = { ...benchConfigFor(config, server.url, 1, config.seeds[0] ?? 0, { authorization: `Bearer ${userKey}` }, eos), loop: 'closed' as const, concurrency: config.parallel, durationS: config.calibrationS, warmupS: Math.min(config.warmupS, config.calibrationS / 2) };
    const res = await runBench(bench, dir);
    const s = summarize(res.records, { sloMs: config.sloMs, windowS: bench.durationS - bench.warmupS, timeoutMs: config.timeoutS * 1000 });
    if (!(s.request_throughput > 0)) throw new Error(`ladder: the closed-loop calibration completed nothing (see ${path.join(dir, 'server.log')})`);
    const out = { loop: 'CLOSED LOOP (capacity calibration only)', rung: rungId, concurrency: config.parallel, duration_s: config.calibrationS, capacity_rps: s.request_throughput, p50_e2e_ms: s.median_e2el_ms, completed: s.completed };
    await writeFile(path.join(dir, 'calibration.json'), JSON.stringify(out, null, 2) + '\n');
    return out;
  } finally {
    await server.stop();
  }
}

async function appendEvent(studyDir: string, e: Record<string, unknown>): Promise<void> {
  await appendFile(path.join(studyDir, 'events.jsonl'), JSON.stringify({ at: new Date().toISOString(), ...e }) + '\n');
}

/**
 * A path as the server (working directory: the repository root) should be given it: relative when
 * it is inside the repository, so no machine path reaches the server's /stats and so meta.json.
 */
function serverPath(p: string): string {
  const rel = path.relative(REPO_ROOT, path.resolve(p));
  return rel.startsWith('..') || path.isAbsolute(rel) ? path.resolve(p) : rel;
}

const loadavg = (): number[] => os.loadavg().map((v) => Number(v.toFixed(2)));

async function runOne(config: LadderConfig, studyDir: string, run: PlannedRun, env: Record<string, string>, keys: { user: string; operator: string }, eos: EosTarget | null): Promise<LadderRow> {
  const dir = runDir(studyDir, run.runId);
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir, { recursive: true });
  const rung = rungById(run.rungId);
  const startedAt = new Date().toISOString();
  const t0 = performance.now();
  const loadBefore = loadavg();
  const src = sourceInfo();
  const machine = machineProbe();
  const base: LadderRow = {
    run_id: run.runId, index: run.index, block: run.block, position: run.position, rung: run.rungId, rep: run.rep, rate: run.rate, seed: run.seed,
    status: 'failed', error: null, started_at: startedAt, finished_at: startedAt, wall_s: 0, probe_ms: null, loadavg_before: loadBefore, loadavg_after: [],
    git_commit: src.git_head, git_dirty: src.git_dirty, machine: `${String(machine['cpu_model'])} x${String(machine['num_cpus'])} (host ${String(machine['hostname_hash'])})`,
    num_arrivals: 0, completed: 0, num_shed: 0, num_timeouts: 0, goodput_rps: 0, throughput_rps: 0, slo_attainment: NaN, slo_attainment_admitted: NaN,
    shed_rate: NaN, p50_ttft_ms: NaN, p99_ttft_ms: NaN, p50_e2e_ms: NaN, p99_e2e_ms: NaN, generator_valid: false,
    trace_file: rung.guarantee === null ? null : TRACE_FILE,
  };
  let row = base;
  let server: ServeChild | null = null;
  try {
    const bench = benchConfigFor(config, 'http://127.0.0.1:1', run.rate, run.seed, { authorization: `Bearer ${keys.user}` }, eos);
    await verifyArrivals(studyDir, run.rate, run.seed, bench);
    await appendEvent(studyDir, { event: 'server-start', run: run.runId });
    server = await startServe(serveArgsFor(config, rung.serveFlags, rung.guarantee === null ? null : serverPath(path.join(dir, TRACE_FILE))), path.join(dir, 'server.log'), env);
    const cfg = { ...bench, url: server.url };
    const model = await resolveModel(cfg);
    const probe = await runProbe(server.url, model, keys.operator);
    await writeFile(path.join(dir, 'probe.json'), JSON.stringify(probe, null, 2) + '\n');
    const res = await runBench({ ...cfg, model }, dir);
    const s = summarize(res.records, { sloMs: config.sloMs, windowS: config.durationS - config.warmupS, timeoutMs: config.timeoutS * 1000 });
    await writeFile(path.join(dir, 'summary.json'), JSON.stringify(s, null, 2) + '\n');
    const gv = res.meta['generator_validation'] as GeneratorValidation;
    row = {
      ...base, status: probe.probeMs === null ? 'failed' : 'ok', error: probe.error, probe_ms: probe.probeMs,
      num_arrivals: s.num_arrivals, completed: s.completed, num_shed: s.num_shed, num_timeouts: s.num_timeouts,
      goodput_rps: s.request_goodput, throughput_rps: s.request_throughput, slo_attainment: s.slo_attainment,
      slo_attainment_admitted: s.slo_attainment_admitted, shed_rate: s.shed_rate, p50_ttft_ms: s.median_ttft_ms,
      p99_ttft_ms: s.p99_ttft_ms, p50_e2e_ms: s.median_e2el_ms, p99_e2e_ms: s.p99_e2el_ms, generator_valid: gv.valid,
    };
  } catch (err) {
    row = { ...base, error: (err as Error).message };
  } finally {
    await server?.stop();
  }
  row = { ...row, loadavg_after: loadavg(), finished_at: new Date().toISOString(), wall_s: Number(((performance.now() - t0) / 1000).toFixed(2)) };
  await writeFile(path.join(dir, 'row.json'), stringifyRow(row));
  return row;
}
