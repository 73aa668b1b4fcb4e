// One benchmark run end to end: draw the schedule, write it, run the loop, write records and
// meta.json with the generator's own validation (KS of the arrival process, scheduling slip).
import { request as undiciRequest } from 'undici';
import path from 'node:path';
import type { ArrivalKind } from './arrivals.ts';
import { arrivalTimesMs, gapsOf } from './arrivals.ts';
import type { WorkloadKind, RequestSpec } from './workloads.ts';
import { isNaturalWorkload, NATURAL_WORKLOADS, Workload } from './workloads.ts';
import type { EosTarget } from './natural-length.ts';
import { eosBias } from './natural-length.ts';
import { probeEos } from './eos-probe.ts';
import type { ClientOptions } from './client.ts';
import type { Progress } from './generator.ts';
import { runClosedLoop, runOpenLoop } from './generator.ts';
import type { LoopKind, RequestRecord } from './record.ts';
import { SCHEDULE_COLUMNS, SCHEDULE_FILE, writeMeta, writeParquet, writeRecords } from './store.ts';
import type { KsResult } from './stats.ts';
import { ksExponential, quantileSorted, sortedCopy } from './stats.ts';
import { machineProbe, sourceInfo } from './provenance.ts';

export interface BenchConfig {
  /** Base URL of the target, e.g. http://127.0.0.1:8080. */
  readonly url: string;
  /** Chat-completions path. */
  readonly path: string;
  /** Model name to send; null = first entry of GET /v1/models, else 'default'. */
  readonly model: string | null;
  readonly loop: LoopKind;
  readonly arrival: ArrivalKind;
  /** Open loop: mean arrivals per second. */
  readonly rate: number;
  readonly gammaShape: number;
  /** Closed loop: number of workers. */
  readonly concurrency: number;
  readonly durationS: number;
  readonly warmupS: number;
  readonly cooldownS: number;
  readonly timeoutS: number;
  readonly seed: number;
  readonly workload: WorkloadKind;
  readonly tokensPerWord: number;
  readonly contextTokens: number;
  readonly mix: readonly [number, number, number];
  readonly promptTokens: number;
  readonly outputTokens: number;
  readonly sloHeaderMs: number | null;
  readonly ignoreEos: boolean;
  /** The run is marked invalid when slip p99 exceeds this. */
  readonly maxSlipP99Ms: number;
  /** Sent with every request (lower-case names), e.g. authorization; values are never written to meta.json. */
  readonly headers?: Readonly<Record<string, string>>;
  /** Natural-length workloads: the target's EOS token and vocabulary; absent: learned from the target (eos-probe.ts). */
  readonly eos?: EosTarget;
  /** Natural-length workloads: the mean output length the EOS bias is sized for; absent: the workload's default. */
  readonly naturalMeanTokens?: number;
}

export interface GeneratorValidation {
  /** KS of the intended inter-arrival gaps against Exp(rate); null unless Poisson (or gamma shape 1). */
  ks_intended: KsResult | null;
  /** KS of the actual send gaps (what the server saw) against the same Exp(rate). */
  ks_sent: KsResult | null;
  slip_p50_ms: number;
  slip_p99_ms: number;
  slip_max_ms: number;
  max_slip_p99_ms: number;
  /** False when the generator fell behind its own schedule (slip p99 above the bound). */
  valid: boolean;
  invalid_reason: string | null;
}

export interface RunResult {
  readonly dir: string;
  readonly records: RequestRecord[];
  readonly meta: Record<string, unknown>;
}

export function validateConfig(c: BenchConfig): void {
  const need = (ok: boolean, what: string, got: unknown): void => {
    if (!ok) throw new Error(`bench: expected ${what}, got ${String(got)}`);
  };
  need(/^https?:\/\//.test(c.url), 'an http(s) URL', c.url);
  need(c.durationS > 0, 'duration > 0', c.durationS);
  need(c.warmupS >= 0 && c.cooldownS >= 0 && c.warmupS + c.cooldownS < c.durationS, 'warmup + cooldown < duration', `${c.warmupS}+${c.cooldownS}`);
  need(c.timeoutS > 0, 'timeout > 0', c.timeoutS);
  need(Number.isInteger(c.seed), 'an integer seed', c.seed);
  if (c.loop === 'open') need(c.rate > 0, 'rate > 0', c.rate);
  else need(Number.isInteger(c.concurrency) && c.concurrency > 0, 'concurrency a positive integer', c.concurrency);
  if (c.naturalMeanTokens !== undefined) need(c.naturalMeanTokens > 1, 'a natural mean output length > 1 token', c.naturalMeanTokens);
  if (c.eos !== undefined) {
    need(Number.isInteger(c.eos.vocabSize) && c.eos.vocabSize > 1, 'a vocabulary size > 1', c.eos.vocabSize);
    need(Number.isInteger(c.eos.eosTokenId) && c.eos.eosTokenId >= 0 && c.eos.eosTokenId < c.eos.vocabSize, `an EOS token id in [0, ${c.eos.vocabSize})`, c.eos.eosTokenId);
  }
}

/** Draws the schedule (open loop) and the specs; deterministic in the config. */
export function drawSchedule(c: BenchConfig): { arrivalsMs: Float64Array; specs: RequestSpec[]; workload: Workload } {
  const workload = newWorkload(c);
  if (c.loop === 'closed') return { arrivalsMs: new Float64Array(0), specs: [], workload };
  const arrivalsMs = arrivalTimesMs({ kind: c.arrival, ratePerS: c.rate, durationS: c.durationS, gammaShape: c.gammaShape, seed: c.seed });
  const specs = Array.from({ length: arrivalsMs.length }, () => workload.next());
  return { arrivalsMs, specs, workload };
}

function newWorkload(c: BenchConfig): Workload {
  return new Workload({
    kind: c.workload,
    seed: c.seed,
    tokensPerWord: c.tokensPerWord,
    contextTokens: c.contextTokens,
    mix: c.mix,
    promptTokens: c.promptTokens,
    outputTokens: c.outputTokens,
    ...(c.eos === undefined ? {} : { eos: c.eos }),
    ...(c.naturalMeanTokens === undefined ? {} : { naturalMeanTokens: c.naturalMeanTokens }),
  });
}

/**
 * The config with the target's EOS token and vocabulary filled in when a natural-length workload
 * needs them and the caller gave none; a string says why they could not be learned.
 */
export async function withEos(c: BenchConfig, model: string): Promise<BenchConfig | string> {
  if (!isNaturalWorkload(c.workload) || c.eos !== undefined) return c;
  const eos = await probeEos({ url: c.url, path: c.path, model, headers: c.headers ?? {} });
  return typeof eos === 'string' ? `${c.workload}: ${eos}` : { ...c, eos };
}

/** What meta.json records about a natural-length workload's hidden lengths (null for the others). */
function naturalMeta(c: BenchConfig): Record<string, unknown> | null {
  if (!isNaturalWorkload(c.workload) || c.eos === undefined) return null;
  const meanTokens = c.naturalMeanTokens ?? NATURAL_WORKLOADS[c.workload].meanTokens;
  return { ...c.eos, mean_tokens: meanTokens, eos_bias: eosBias(meanTokens, c.eos.vocabSize), cap_tokens: NATURAL_WORKLOADS[c.workload].capTokens, temperature: 1 };
}

/**
 * Why the target cannot be benchmarked (no connection, or it refuses the credentials), or null.
 * Asked before the schedule is drawn: a dead server fails the run in seconds, not after a
 * duration of transport errors.
 */
export async function unreachable(c: BenchConfig, timeoutMs = 5000): Promise<string | null> {
  try {
    const res = await undiciRequest(new URL('/v1/models', c.url), { headers: { ...c.headers }, headersTimeout: timeoutMs, bodyTimeout: timeoutMs, signal: AbortSignal.timeout(timeoutMs) });
    await res.body.dump();
    if (res.statusCode === 401 || res.statusCode === 403) return `${c.url} refused the request's credentials (HTTP ${res.statusCode}): check --api-key and --header`;
    return null;
  } catch (err) {
    const e = err as Error & { code?: string; cause?: { code?: string } };
    const code = e.code ?? e.cause?.code ?? e.name;
    return `cannot reach ${c.url} (${code}${e.message === '' ? '' : `: ${e.message}`}); is the server running?`;
  }
}

/** The config as meta.json records it: header values (credentials) redacted. */
function recordedConfig(c: BenchConfig, model: string): Record<string, unknown> {
  const headers = Object.fromEntries(Object.keys(c.headers ?? {}).map((k) => [k, '<redacted>']));
  return { ...c, model, headers };
}

export async function resolveModel(c: BenchConfig): Promise<string> {
  if (c.model !== null) return c.model;
  try {
    const res = await undiciRequest(new URL('/v1/models', c.url), { headers: { ...c.headers }, headersTimeout: 2000, bodyTimeout: 2000 });
    const j = (await res.body.json()) as { data?: Array<{ id?: string }> };
    return j.data?.[0]?.id ?? 'default';
  } catch {
    return 'default';
  }
}

/** GET /stats on the target, if it has one. */
export async function fetchStats(url: string, headers: Readonly<Record<string, string>> = {}): Promise<unknown> {
  return fetchJson(url, '/stats', headers);
}

/** GET a JSON document from the target; null when it does not answer 200 within `timeoutMs`. */
export async function fetchJson(url: string, route: string, headers: Readonly<Record<string, string>> = {}, timeoutMs = 2000): Promise<unknown> {
  try {
    const res = await undiciRequest(new URL(route, url), { headers: { ...headers }, headersTimeout: timeoutMs, bodyTimeout: timeoutMs });
    if (res.statusCode !== 200) {
      await res.body.dump();
      return null;
    }
    return await res.body.json();
  } catch {
    return null;
  }
}

export function validateGenerator(c: BenchConfig, arrivalsMs: Float64Array, records: readonly RequestRecord[]): GeneratorValidation {
  const exponential = c.loop === 'open' && (c.arrival === 'poisson' || (c.arrival === 'gamma' && c.gammaShape === 1));
  const slip = sortedCopy(records.map((r) => r.slip_ms));
  const p99 = quantileSorted(slip, 0.99);
  const valid = c.loop === 'closed' || !(p99 > c.maxSlipP99Ms);
  const sent = sortedCopy(records.map((r) => r.sent_ms));
  return {
    ks_intended: exponential ? ksExponential(gapsOf(arrivalsMs), c.rate / 1000) : null,
    ks_sent: exponential ? ksExponential(gapsOf(sent), c.rate / 1000) : null,
    slip_p50_ms: quantileSorted(slip, 0.5),
    slip_p99_ms: p99,
    slip_max_ms: slip[slip.length - 1] ?? NaN,
    max_slip_p99_ms: c.maxSlipP99Ms,
    valid,
    invalid_reason: valid ? null : `generator fell behind its schedule: slip p99 ${p99.toFixed(2)} ms > ${c.maxSlipP99Ms} ms`,
  };
}

/** Runs one benchmark and writes schedule.parquet, records.parquet and meta.json under `dir`. */
export async function runBench(config: BenchConfig, dir: string, progress?: Progress): Promise<RunResult> {
  validateConfig(config);
  const model = await resolveModel(config);
  const c = await withEos(config, model);
  if (typeof c === 'string') throw new Error(c);
  const { arrivalsMs, specs, workload } = drawSchedule(c);
  // The arrival realisation and workload draws go to disk before the first request is sent.
  await writeParquet(
    path.join(dir, SCHEDULE_FILE),
    SCHEDULE_COLUMNS,
    specs.map((s, i) => ({
      request_id: i,
      intended_ms: arrivalsMs[i] ?? 0,
      klass: s.klass,
      prefix_id: s.prefixId,
      prompt_tokens_est: s.promptTokensEst,
      prompt_chars: s.messages.reduce((n, m) => n + m.content.length, 0),
      max_tokens: s.maxTokens,
    })),
  );
  const u = new URL(c.url);
  const client: ClientOptions = {
    origin: u.origin,
    path: c.path,
    model,
    timeoutMs: c.timeoutS * 1000,
    sloHeaderMs: c.sloHeaderMs,
    ignoreEos: c.ignoreEos,
    headers: c.headers ?? {},
  };
  const statsBefore = await fetchStats(c.url, c.headers);
  const startedAt = new Date().toISOString();
  const edges = { durationMs: c.durationS * 1000, warmupMs: c.warmupS * 1000, cooldownMs: c.cooldownS * 1000 };
  const records =
    c.loop === 'open'
      ? await runOpenLoop({ client, arrivalsMs, specs, ...edges, ...(progress ? { progress } : {}) })
      : await runClosedLoop({ client, concurrency: c.concurrency, nextSpec: () => workload.next(), ...edges, ...(progress ? { progress } : {}) });
  const finishedAt = new Date().toISOString();
  const statsAfter = await fetchStats(c.url, c.headers);
  await writeRecords(dir, records);
  const meta = {
    tool: 'headroom bench run',
    loop: c.loop,
    loop_note:
      c.loop === 'closed'
        ? 'CLOSED LOOP (N workers): offered load follows server speed; for capacity calibration only, not overload behaviour'
        : 'open loop: scheduled arrivals, latency from intended arrival',
    config: recordedConfig(c, model),
    seed: c.seed,
    window_s: c.durationS - c.warmupS - c.cooldownS,
    timeout_ms: c.timeoutS * 1000,
    started_at: startedAt,
    finished_at: finishedAt,
    num_rows: records.length,
    source: sourceInfo(),
    machine: machineProbe(),
    workload: { kind: c.workload, mixed_scale: workload.mixedScale(), prompt_heuristic: 'one common English word ≈ one token; see src/harness/prompt-text.ts', natural_length: naturalMeta(c) },
    generator_validation: validateGenerator(c, arrivalsMs, records),
    target_stats_before: statsBefore,
    target_stats_after: statsAfter,
  };
  await writeMeta(dir, meta);
  return { dir, records, meta };
}
