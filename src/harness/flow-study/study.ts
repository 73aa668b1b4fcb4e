// The flow-control calibration study (issue 14; after the reference "flow-control-benchmarks"),
// at this machine's scale: N Headroom engine replicas (prefix cache off) behind one Headroom
// gateway whose cap changes per point.
//
//   1. request-sweep  closed loop, C clients, uniform prompts: every request cap once (calibration
//                     points); the rule in analysis.ts picks a cap and its next larger boundary,
//                     which get the remaining matched repeats (selected points).
//   2. mixed          closed loop, mixed 512/2,048/8,192-token inputs scaled to --context-tokens,
//                     fixed outputs: the selected request cap (counting tokens too, under a cap too
//                     large to bind, so the gateway measures the input tokens in flight: that mean
//                     is the "measured capacity"); input-token caps at levels x capacity; the
//                     input-plus-output estimate cap at 1.0x capacity (each request counted as
//                     prompt + max_tokens). The request cap and the 1.0x input cap are repeated.
//   3. open-noisy     open-loop gamma arrivals at the selected caps, at shares of their measured
//                     closed-loop RPS: a closed loop finds capacity, it cannot show overload.
//
// Every file is rewritten after every point, so a study cut short leaves consistent evidence of
// the points it ran. Repeat r uses seed + r in every configuration (matched repeats).
import path from 'node:path';
import type { RequestRecord } from '../record.ts';
import { writeCsv } from './csv.ts';
import { REQUEST_COLUMNS, TRAFFIC_COLUMNS, EVIDENCE_COLUMNS, requestRows, trafficSamples } from './evidence.ts';
import type { EvidenceRow, RequestColumn, TrafficColumn } from './evidence.ts';
import type { CapKind, PointPlan, PointSummary, StudyPhase } from './points.ts';
import { CAP_FLAG, SUMMARY_COLUMNS, configKey, labelOf, summarizePoint, summaryRow } from './points.ts';
import type { MatchedMedian } from './analysis.ts';
import { chooseRequestCap, mixedDecision } from './analysis.ts';
import type { PointEnv } from './run-point.ts';
import { runPoint, workloadFor } from './run-point.ts';
import { SYSTEM_COLUMNS } from './sampler.ts';
import type { SystemRow } from './sampler.ts';
import { SERVE_READY, getJson, prefixCacheOffInStats, startHeadroom } from './topology.ts';
import type { Proc } from './topology.ts';
import { ADMISSION_COLUMNS, admissionRow, analysisMedians, writeAnalysis } from './write-analysis.ts';
import { writeReport } from './report.ts';

export interface StudyConfig {
  readonly outDir: string;
  readonly runner: 'mock' | 'llama';
  /** GGUF model for the llama runner (null: the generated tiny model). */
  readonly model: string | null;
  readonly replicas: number;
  /** Extra `headroom serve` flags for every replica (threads, ctx, parallel, mock speed). */
  readonly replicaFlags: readonly string[];
  readonly phases: readonly StudyPhase[];
  readonly requestCaps: readonly number[];
  /** Closed-loop clients of the request sweep and of the mixed comparison. */
  readonly concurrency: number;
  readonly mixedConcurrency: number;
  readonly tokenLevels: readonly number[];
  readonly repeats: number;
  /** Share of the best steady RPS a cap may give up and still be chosen (0.05: within 5%). */
  readonly toleranceShare: number;
  /** Open-loop rates as shares of the selected configuration's closed-loop steady RPS. */
  readonly openRateShares: readonly number[];
  readonly seed: number;
  readonly env: Omit<PointEnv, 'replicaUrls' | 'replicaArgs' | 'model'>;
  /** The command line that ran the study, recorded in analysis.json. */
  readonly command: string;
  readonly log: (line: string) => void;
}

/** Everything measured so far; the files are a pure function of it. */
export interface StudyState {
  readonly summaries: PointSummary[];
  readonly evidence: EvidenceRow[];
  readonly requests: Array<Record<RequestColumn, string | number | null>>;
  readonly traffic: Array<Record<TrafficColumn, string | number>>;
  readonly system: SystemRow[];
  readonly selected: Set<string>;
  /** Mixed: the gateway-measured input tokens in flight at the selected request cap. */
  capacity: { inputTokens: number; fromPoint: string; largestRequestTokens: number } | null;
  readonly startedAt: string;
}

export const REPLICA_BASE_FLAGS = ['--prefix-cache', 'off', '--admission', 'off'] as const;

export async function runStudy(c: StudyConfig): Promise<StudyState> {
  const replicaArgs = ['serve', '--runner', c.runner, ...(c.model === null ? [] : ['--model', c.model]), '--host', '127.0.0.1', '--port', '0',
    '--log-format', 'text', ...REPLICA_BASE_FLAGS, ...c.replicaFlags];
  const state: StudyState = { summaries: [], evidence: [], requests: [], traffic: [], system: [], selected: new Set(), capacity: null, startedAt: new Date().toISOString() };
  const replicas: Proc[] = [];
  try {
    for (let i = 0; i < c.replicas; i++) replicas.push(await startHeadroom(replicaArgs, SERVE_READY));
    const urls = replicas.map((r) => r.url);
    for (const [i, u] of urls.entries()) {
      if (!prefixCacheOffInStats(await getJson(u, '/stats'))) throw new Error(`replica-${i}: /stats does not show the prefix cache off`);
    }
    const models = (await getJson(urls[0]!, '/v1/models')) as { data?: Array<{ id?: string }> } | null;
    const model = models?.data?.[0]?.id ?? 'default';
    const env: PointEnv = { ...c.env, replicaUrls: urls, replicaArgs, model };
    c.log(`${c.replicas} replicas up (${c.runner}, model ${model}); prefix cache off by /stats`);
    const run = async (plan: PointPlan): Promise<PointSummary> => {
      c.log(`point ${plan.id}: ${plan.gatewayFlags.join(' ')} ${plan.loop === 'closed' ? `C=${plan.concurrency}` : `rate=${plan.ratePerS.toFixed(2)}/s`}`);
      const res = await runPoint(plan, env);
      const s = summarizePoint(plan, res.records, res.windowS);
      record(state, plan, s, res.records, res.system, res.evidence, c.env.sampleIntervalMs);
      await writeFiles(c, state);
      c.log(`  steady RPS ${s.steadyRps.toFixed(2)}  p95 TTFT ${s.p95TtftMs.toFixed(0)} ms  429 ${(s.rate429 * 100).toFixed(1)}%  gates ${res.evidence.gates_passed ? 'pass' : 'FAIL'}`);
      return s;
    };
    const plan = (phase: StudyPhase, capKind: CapKind, level: string, capValue: number, repeat: number, extra: Partial<PointPlan> = {}, flags?: string[]): PointPlan => {
      const config = extra.config ?? `${capKind}-${level}`;
      return {
        id: `${phase}/${config}/r${repeat}`, phase, config, capKind, level, capValue, repeat,
        loop: 'closed', workload: phase === 'request-sweep' ? 'uniform' : 'mixed', concurrency: phase === 'request-sweep' ? c.concurrency : c.mixedConcurrency,
        ratePerS: 0, seed: c.seed + repeat, gatewayFlags: flags ?? [CAP_FLAG[capKind], String(capValue)], note: '', ...extra,
      };
    };

    // 1. The request-count sweep.
    let requestCap = c.requestCaps[0]!;
    if (c.phases.includes('request-sweep')) {
      const first: PointSummary[] = [];
      for (const cap of c.requestCaps) first.push(await run(plan('request-sweep', 'request', String(cap), cap, 1)));
      const choice = chooseRequestCap(first.map((s) => ({ cap: s.plan.capValue, rps: s.steadyRps })), c.toleranceShare);
      const chosen = [choice.selected, ...(choice.comparison === null ? [] : [choice.comparison])];
      for (const cap of chosen) state.selected.add(configKey('request-sweep', `request-${cap}`));
      c.log(`request cap ${choice.selected} chosen (comparison ${String(choice.comparison)}): ${choice.rule}`);
      for (let r = 2; r <= c.repeats; r++) for (const cap of chosen) await run(plan('request-sweep', 'request', String(cap), cap, r));
      requestCap = choice.selected;
      await writeFiles(c, state);
    }

    // 2. The mixed-size comparison.
    if (c.phases.includes('mixed')) {
      const w = workloadFor(plan('mixed', 'request', 'x', 1, 1), env);
      const largest = largestRequestTokens(w, 200);
      const unbound = 1_000_000_000;
      const reqPlan = (r: number): PointPlan =>
        plan('mixed', 'request', String(requestCap), requestCap, r, {}, [CAP_FLAG.request, String(requestCap), CAP_FLAG.input, String(unbound)]);
      const r1 = await run(reqPlan(1));
      const gwTicks = state.system.filter((t) => t.point_id === r1.plan.id && t.source === 'gateway' && typeof t.t_s === 'number'
        && t.t_s >= c.env.warmupS && t.t_s < c.env.durationS - c.env.cooldownS && typeof t.flow_inflight_input_tokens === 'number');
      const mean = gwTicks.reduce((s, t) => s + (t.flow_inflight_input_tokens as number), 0) / gwTicks.length;
      if (!(mean > 0)) throw new Error(`${r1.plan.id}: no gateway sample of the input tokens in flight in the steady window; cannot measure capacity`);
      state.capacity = { inputTokens: Math.round(mean), fromPoint: r1.plan.id, largestRequestTokens: largest };
      c.log(`measured capacity: ${state.capacity.inputTokens} input tokens in flight (gateway estimate) at request cap ${requestCap}`);
      const floored = (want: number, floor: number): { v: number; note: string } =>
        want >= floor ? { v: want, note: '' } : { v: floor, note: `cap floored at the largest request (${floor}) from ${want}` };
      const inputPlan = (level: number, r: number): PointPlan => {
        const { v, note } = floored(Math.round(level * state.capacity!.inputTokens), largest);
        return plan('mixed', 'input', `${level.toFixed(1)}x`, v, r, { note });
      };
      for (const level of c.tokenLevels) await run(inputPlan(level, 1));
      const total = floored(state.capacity.inputTokens, largest + c.env.outputTokens);
      await run(plan('mixed', 'total', '1.0x', total.v, 1, { note: total.note }));
      state.selected.add(configKey('mixed', `request-${requestCap}`));
      state.selected.add(configKey('mixed', 'input-1.0x'));
      for (let r = 2; r <= c.repeats; r++) {
        await run(reqPlan(r));
        await run(inputPlan(1, r));
      }
      await writeFiles(c, state);
    }

    // 3. Open-loop noisy traffic at the selected caps.
    if (c.phases.includes('open-noisy')) {
      // Rates from the same matched medians the analysis reports (gated points only).
      const medians = analysisMedians(summaryRows(state));
      const medianRps = (key: string): number => medians.find((m) => configKey(m.phase as StudyPhase, m.config) === key)?.medians.steady_rps ?? NaN;
      const targets: Array<{ workload: 'uniform' | 'mixed'; base: string; capKind: CapKind; capValue: number; level: string; flags: string[]; rps: number }> = [];
      const sweepKey = configKey('request-sweep', `request-${requestCap}`);
      if (medianRps(sweepKey) > 0) {
        targets.push({ workload: 'uniform', base: `request-${requestCap}`, capKind: 'request', capValue: requestCap, level: String(requestCap), flags: [CAP_FLAG.request, String(requestCap)], rps: medianRps(sweepKey) });
      }
      const mixedDone = mixedDecision(medians, c.toleranceShare);
      if (mixedDone !== null) {
        const m = mixedDone[mixedDone['selected_kind'] === 'input' ? 'input' : 'request'] as MatchedMedian;
        const p = state.summaries.find((s) => s.plan.phase === 'mixed' && s.plan.config === m.config)!.plan;
        targets.push({ workload: 'mixed', base: `mixed-${m.config}`, capKind: p.capKind, capValue: p.capValue, level: p.level, flags: [...p.gatewayFlags], rps: medianRps(configKey('mixed', m.config)) });
      }
      for (const t of targets) {
        for (const share of c.openRateShares) {
          if (!(t.rps > 0)) continue;
          const rate = t.rps * share;
          const config = `${t.base}-gamma-${share.toFixed(2)}x`;
          await run(plan('open-noisy', t.capKind, t.level, t.capValue, 1, { config, loop: 'open', workload: t.workload, concurrency: 0, ratePerS: rate }, t.flags));
          state.selected.add(configKey('open-noisy', config));
        }
      }
    }
    await writeFiles(c, state);
    await writeAnalysis(c, state);
    await writeReport(c.outDir);
    return state;
  } finally {
    await Promise.all(replicas.map((r) => r.stop()));
  }
}

/** The largest prompt the mixed workload sends, in the gateway's estimate (bytes / 4), over `n` draws. */
function largestRequestTokens(w: ReturnType<typeof workloadFor>, n: number): number {
  let max = 0;
  for (let i = 0; i < n; i++) {
    const spec = w.next();
    const bytes = spec.messages.reduce((s, m) => s + Buffer.byteLength(m.content) + Buffer.byteLength(m.role), 0);
    max = Math.max(max, Math.ceil((bytes * 1.1) / 4));
  }
  return max;
}

function record(state: StudyState, plan: PointPlan, s: PointSummary, records: readonly RequestRecord[], system: readonly SystemRow[], ev: EvidenceRow, intervalMs: number): void {
  state.summaries.push(s);
  state.evidence.push(ev);
  state.requests.push(...requestRows(plan.id, records));
  state.traffic.push(...trafficSamples(plan.id, records, intervalMs));
  state.system.push(...system);
}

export const FILES = {
  summary: 'summary.csv',
  admission: 'admission-comparison.csv',
  requests: 'request-results.csv',
  traffic: 'traffic-samples.csv',
  system: 'system-metrics.csv',
  evidence: 'run-evidence.csv',
  analysis: 'analysis.json',
  report: 'report.md',
} as const;

/** summary.csv's rows: each point's numbers, its label as of now, and whether it passed its gates. */
export function summaryRows(state: StudyState): Array<ReturnType<typeof summaryRow>> {
  const gates = new Map(state.evidence.map((e) => [e.point_id, e.gates_passed === true]));
  return state.summaries.map((s) => summaryRow(s, labelOf(s.plan, state.selected), gates.get(s.plan.id) ?? false));
}

export async function writeFiles(c: Pick<StudyConfig, 'outDir'>, state: StudyState): Promise<void> {
  const gates = new Map(state.evidence.map((e) => [e.point_id, e.gates_passed === true]));
  const label = (p: PointPlan): ReturnType<typeof labelOf> => labelOf(p, state.selected);
  const f = (name: string): string => path.join(c.outDir, name);
  await writeCsv(f(FILES.summary), { columns: SUMMARY_COLUMNS, rows: summaryRows(state) });
  await writeCsv(f(FILES.admission), {
    columns: ADMISSION_COLUMNS,
    rows: state.summaries.filter((s) => s.plan.phase === 'mixed').map((s) => admissionRow(s, label(s.plan), gates.get(s.plan.id) ?? false, state.capacity)),
  });
  await writeCsv(f(FILES.requests), { columns: REQUEST_COLUMNS, rows: state.requests });
  await writeCsv(f(FILES.traffic), { columns: TRAFFIC_COLUMNS, rows: state.traffic });
  await writeCsv(f(FILES.system), { columns: SYSTEM_COLUMNS, rows: state.system });
  const byId = new Map(state.summaries.map((s) => [s.plan.id, s.plan]));
  await writeCsv(f(FILES.evidence), { columns: EVIDENCE_COLUMNS, rows: state.evidence.map((e) => ({ ...e, label: label(byId.get(String(e.point_id))!) })) });
}
