// analysis.json and admission-comparison.csv's rows. The analysis is computed from the summary
// rows exactly as summary.csv holds them (summaryFacts reads the same row objects the CSV is
// written from), so recomputing it from the committed CSV gives the same medians.
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { machineProbe, sourceInfo } from '../provenance.ts';
import type { MatchedMedian, SummaryFacts } from './analysis.ts';
import { MEDIAN_METRICS, matchedMedians, mixedDecision, requestDecision } from './analysis.ts';
import type { PointLabel, PointSummary } from './points.ts';
import { CAP_UNIT } from './points.ts';
import type { StudyConfig, StudyState } from './study.ts';
import { summaryRows } from './study.ts';

export const ADMISSION_COLUMNS = [
  'point_id', 'config', 'cap_kind', 'level', 'cap_value', 'cap_unit', 'capacity_input_tokens', 'repeat', 'label',
  'steady_rps', 'input_tokens_per_s', 'p95_ttft_short_ms', 'p95_ttft_medium_ms', 'p95_ttft_long_ms', 'p95_ttft_ms', 'rate_429', 'gates_passed',
] as const;

export function admissionRow(s: PointSummary, label: PointLabel, gatesPassed: boolean, capacity: StudyState['capacity']): Record<(typeof ADMISSION_COLUMNS)[number], string | number | boolean | null> {
  const p = s.plan;
  return {
    point_id: p.id, config: p.config, cap_kind: p.capKind, level: p.level, cap_value: p.capValue, cap_unit: CAP_UNIT[p.capKind],
    capacity_input_tokens: capacity?.inputTokens ?? null, repeat: p.repeat, label,
    steady_rps: s.steadyRps, input_tokens_per_s: s.inputTokensPerS,
    p95_ttft_short_ms: s.p95TtftByClassMs.short, p95_ttft_medium_ms: s.p95TtftByClassMs.medium, p95_ttft_long_ms: s.p95TtftByClassMs.long,
    p95_ttft_ms: s.p95TtftMs, rate_429: s.rate429, gates_passed: gatesPassed,
  };
}

const STUDY_DIR = path.dirname(fileURLToPath(import.meta.url));

/** sha256 over the study's own sources (this folder's .ts files, in name order); provenance's hash covers src/harness/*.ts only. */
function studySha256(): string {
  const h = createHash('sha256');
  for (const f of readdirSync(STUDY_DIR).filter((f) => f.endsWith('.ts')).sort()) {
    h.update(f);
    h.update(readFileSync(path.join(STUDY_DIR, f)));
  }
  return h.digest('hex');
}

/** A summary.csv row (as strings or as the values written) to the analysis's facts. */
export function summaryFacts(row: Readonly<Record<string, unknown>>): SummaryFacts {
  const n = (v: unknown): number => (v === '' || v === null || v === undefined ? NaN : Number(v));
  return {
    phase: String(row['phase']),
    config: String(row['config']),
    cap_kind: String(row['cap_kind']),
    level: String(row['level']),
    cap_value: n(row['cap_value']),
    repeat: n(row['repeat']),
    metrics: Object.fromEntries(MEDIAN_METRICS.map((m) => [m, n(row[m])])) as SummaryFacts['metrics'],
  };
}

/** Only gated points enter the medians: a point that failed a gate is evidence, not a measurement. */
export function analysisMedians(rows: ReadonlyArray<Readonly<Record<string, unknown>>>): MatchedMedian[] {
  return matchedMedians(rows.filter((r) => r['gates_passed'] === true || r['gates_passed'] === 'true').map(summaryFacts));
}

export async function writeAnalysis(c: StudyConfig, state: StudyState): Promise<Record<string, unknown>> {
  const medians = analysisMedians(summaryRows(state));
  const tryDecide = <T>(f: () => T): T | { error: string } => {
    try {
      return f();
    } catch (err) {
      return { error: (err as Error).message };
    }
  };
  const request = medians.some((m) => m.phase === 'request-sweep') ? tryDecide(() => requestDecision(medians, c.toleranceShare)) : null;
  const mixed = tryDecide(() => mixedDecision(medians, c.toleranceShare));
  const failed = state.evidence.filter((e) => e.gates_passed !== true).map((e) => e.point_id);
  const selectedCap = request !== null && 'selected_cap' in request ? request['selected_cap'] : null;
  const analysis = {
    tool: 'bench/flow-study/study.ts',
    label: c.runner === 'mock' ? 'MOCK-RUNNER SMOKE RUN: exercises the pipeline; its numbers describe the mock cost model, not a model' : 'calibration study',
    command: c.command,
    started_at: state.startedAt,
    finished_at: new Date().toISOString(),
    source: { ...sourceInfo(), study_sha256: studySha256() },
    machine: machineProbe(),
    config: { ...c, log: undefined, outDir: undefined },
    topology: {
      replicas: c.replicas,
      replica_flags_always: ['--prefix-cache off', '--admission off'],
      gateway_flags_always: ['--admission off'],
      gateway: 'restarted for every point with that point\'s cap; replicas stay up for the whole study (idle checked before each point)',
    },
    measured_capacity: state.capacity === null ? null : {
      input_tokens: state.capacity.inputTokens,
      from_point: state.capacity.fromPoint,
      method: 'mean over the steady window of the gateway\'s flow.inFlight.inputTokens (sampled from /stats every interval) at the selected request cap on the mixed workload, the gateway counting tokens under an input-token cap too large to bind',
      largest_request_tokens: state.capacity.largestRequestTokens,
      note: 'token caps are floored at the largest request (a request larger than the cap is a 400, not a wait); the input-plus-output cap counts prompt + max_tokens per request against 1.0x the measured input capacity',
    },
    matched_medians: medians,
    median_rule: 'per configuration, the median over its repeats of each metric, gated points only (repeat r has seed + r in every configuration)',
    request_cap_decision: request,
    mixed_decision: mixed,
    open_loop: medians.filter((m) => m.phase === 'open-noisy'),
    decision: {
      request_cap: selectedCap,
      admission: mixed !== null && 'selected_kind' in mixed ? { kind: mixed['selected_kind'], config: mixed['selected_config'] } : null,
      summary:
        `request cap ${String(selectedCap)} selected by the request-cap rule` +
        (mixed !== null && 'selected_kind' in mixed ? `; for mixed sizes the ${String(mixed['selected_kind'])}-based cap (${String(mixed['selected_config'])})` : ''),
    },
    gates: { num_points: state.evidence.length, num_passed: state.evidence.length - failed.length, failed_points: failed },
    selected_configs: [...state.selected],
    claim_boundary: {
      shows: [
        `where, on this machine with ${c.replicas} Headroom ${c.runner} replica(s) (prefix cache off, admission control off) behind one Headroom gateway (admission control off), steady throughput stops rising with the request cap, and what TTFT and 429s the cap costs there (closed loop)`,
        'for one mixed-size workload (scaled inputs, fixed outputs), how a request cap, an input-token cap and an input-plus-output cap trade short- against long-request TTFT and throughput (closed loop)',
        'how the selected cap behaves under open-loop gamma (bursty) arrivals below and above the closed-loop capacity',
      ],
      does_not_show: [
        'an acceptable production rejection rate: closed-loop 429s are backpressure at the boundary, not a target',
        'behaviour with the prefix cache on, with engine admission control on, or with other engines (vLLM, SGLang, llama-server)',
        'any number for another model, context, machine or replica count: caps are calibrated, not portable',
        'KV-memory safety of a token cap: the gateway estimates tokens from bytes (4 per token); KV use and preemptions are recorded beside it',
        'significance: three matched repeats give a median, not a confidence interval; single-run points are calibration points',
        ...(c.runner === 'mock' ? ['anything about a model: the mock runner has an explicit cost model and no weights'] : []),
      ],
    },
  };
  await writeFile(path.join(c.outDir, 'analysis.json'), JSON.stringify(analysis, (_k, v: unknown) => (typeof v === 'number' && !Number.isFinite(v) ? null : v), 2) + '\n');
  return analysis;
}

