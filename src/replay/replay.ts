// Replay: re-run a flight recording's arrivals through a scheduler on the mock runner, with the
// recording's clock, and diff the schedule step by step — a regression tool for scheduling policy.
//
// Lockstep: recorded step i fixes the inputs of replayed step i — the requests its plan saw first
// (submit records give their prompt length, output cap, budget and prompt shape), the aborts, and
// the clock (schedule() at the step's start, update() at its end, the runner's compute time as
// recorded). The replayed plan (rows: request, tokens fed, start position, sampled) and outputs
// (request, tokens gained, finish) are compared with the recorded ones; any difference is a diff.
// With the recorded scheduler settings a mock-runner recording replays with zero diffs; a changed
// setting shows where its decisions part. After the first difference the replay runs its own plan
// (its state no longer matches the recording), so later diffs follow from the first; once the
// recorded steps are used up it steps on until its requests finish, and reports how many more
// steps that took.
//
// Made up, not recorded: prompt tokens (from the block hashes, so shared prefixes stay shared) and
// sampled tokens (the mock's), except that a request the recording saw end on EOS gets EOS as its
// recorded last token. Not reproduced: a prefix hit on a block that held an earlier request's
// generated tokens, and an abort that landed while a step computed (it is applied before the next
// step, where the record lists it).

import type { RequestOutput } from '../engine/outputs.ts';
import type { RunnerPlan, StepResult } from '../engine/plan.ts';
import { Request } from '../engine/request.ts';
import type { EndRequest } from '../engine/request.ts';
import { MockRunner } from '../engine/runner/mock/mock-runner.ts';
import { EOS_ID, MOCK_VOCAB_SIZE } from '../engine/runner/mock/mock-tokenizer.ts';
import type { SchedulerConfig } from '../engine/scheduler/factory.ts';
import { createScheduler } from '../engine/scheduler/factory.ts';
import type { SchedulerPlan } from '../engine/scheduler/scheduler.ts';
import type { StepLine, SubmitLine } from '../obs/recorder/format.ts';
import type { Recording } from '../obs/recorder/reader.ts';

export type Row = readonly [requestId: string, numTokens: number, startPos: number, sampled: 0 | 1];
export type Out = readonly [requestId: string, numNewTokens: number, finish: string | null];

export interface StepDiff {
  /** The recorded step's index (for 'extra': the first replayed step past the recording). */
  readonly index: number;
  /** plan: rows or KV-op count differ; outputs: what requests gained differs; empty: replay planned nothing; extra: replay needed more steps. */
  readonly kind: 'plan' | 'outputs' | 'empty' | 'extra';
  readonly recorded: string;
  readonly replayed: string;
}

export interface ReplayReport {
  readonly run: string;
  readonly scheduler: SchedulerConfig;
  readonly numRecordedSteps: number;
  readonly numReplayedSteps: number;
  readonly numRequests: number;
  /** Steps whose plan or outputs differ (a step with both counts once; an 'extra' tail counts once). */
  readonly numDiffs: number;
  /** The first MAX_DIFFS diffs, in step order. */
  readonly diffs: readonly StepDiff[];
}

export const MAX_DIFFS = 50;
/** Steps the replay may take past the recording before it gives up (a policy that never finishes). */
const MAX_EXTRA_STEPS = 1_000_000;

export interface ReplayOptions {
  /** Scheduler settings that replace the recorded ones (e.g. { scheduler: 'fifo' }). */
  readonly scheduler?: Partial<SchedulerConfig>;
}

export async function replay(rec: Recording, opts: ReplayOptions = {}): Promise<ReplayReport> {
  if (rec.header.segment !== 1) throw new Error(`${rec.header.run}: segments before ${rec.segments[0]} were rotated away; replay needs the run from its first step (record with a larger --record-max-files or --record-max-bytes)`);
  const meta = rec.header.meta;
  const recorded = meta['scheduler'] as SchedulerConfig | undefined;
  if (recorded === undefined) throw new Error(`${rec.header.run}: the header names no scheduler settings`);
  const num = (k: string): number => {
    const v = meta[k];
    if (typeof v !== 'number') throw new Error(`${rec.header.run}: the header has no ${k} (recorded by an older version?)`);
    return v;
  };
  const config: SchedulerConfig = { ...recorded, maxOutputTokens: num('maxOutputTokens'), ...opts.scheduler };
  const runner = new MockRunner({ maxSequences: num('maxSequences'), contextTokens: num('contextTokens'), maxBatchTokens: num('maxBatchTokens'), realTime: false, cost: { speed: 0 } });
  const scheduler = createScheduler(config, runner.info);
  const submits = new Map(rec.submits.map((s) => [s.id, s]));
  const blockSize = typeof recorded.blockSize === 'number' ? recorded.blockSize : 16;
  const requests = new Map<string, Request>();
  const eosAt = eosPoints(rec);
  const numSampled = new Map<string, number>();

  const execute = async (plan: RunnerPlan, computeMs: number): Promise<StepResult> => {
    const r = await runner.execute(plan);
    if (!r.ok) return r;
    const sampled = r.sampled.map((tok, k) => {
      if (tok === null) return null;
      const id = plan.items[k]!.requestId;
      const n = (numSampled.get(id) ?? 0) + 1;
      numSampled.set(id, n);
      return eosAt.get(id) === n ? EOS_ID : tok;
    });
    return { ...r, sampled, computeMs };
  };

  const diffs: StepDiff[] = [];
  let numDiffs = 0;
  let lastDiffIndex = -1;
  const diff = (d: StepDiff): void => {
    if (d.index !== lastDiffIndex) numDiffs++;
    lastDiffIndex = d.index;
    if (diffs.length < MAX_DIFFS) diffs.push(d);
  };

  let steps = 0;
  for (const st of rec.steps) {
    for (const id of st.a) {
      const s = submits.get(id);
      if (s === undefined) throw new Error(`${rec.header.run}: step ${st.i} saw ${id} arrive, but there is no submit record for it`);
      const req = makeRequest(s, requests, blockSize);
      requests.set(id, req);
      scheduler.add(req);
    }
    for (const [id, reason] of st.x) {
      const req = requests.get(id);
      if (req !== undefined && !req.abortRequested) scheduler.abort(req, reason as EndRequest);
    }
    const plan = scheduler.schedule(st.s);
    const rows = plan.runner.items.map((it): Row => [it.requestId, it.tokens.length, it.startPos, it.sample ? 1 : 0]);
    if (isEmpty(plan)) {
      diff({ index: st.i, kind: 'empty', recorded: show(st.r), replayed: 'nothing to run' });
      continue;
    }
    if (!sameRows(rows, st.r) || plan.runner.kvOps.length !== st.kv) diff({ index: st.i, kind: 'plan', recorded: `${show(st.r)}; ${st.kv} KV ops`, replayed: `${show(rows)}; ${plan.runner.kvOps.length} KV ops` });
    const result = await execute(plan.runner, st.c ?? 0);
    const outputs = [...plan.outputs, ...scheduler.update(plan, result, st.e)];
    steps++;
    const outs = outputs.map(toOut);
    if (!sameOuts(outs, st.o)) diff({ index: st.i, kind: 'outputs', recorded: show(st.o), replayed: show(outs) });
  }

  // Past the recording: step on (at the mean recorded step time) until the replay's requests finish.
  const last = rec.steps.at(-1);
  const stepMs = rec.steps.length === 0 ? 1 : Math.max(1e-3, rec.steps.reduce((a, s) => a + (s.e - s.s), 0) / rec.steps.length);
  let now = last?.e ?? 0;
  let extra = 0;
  while (scheduler.numUnfinished > 0 && extra < MAX_EXTRA_STEPS) {
    const plan = scheduler.schedule(now);
    if (isEmpty(plan)) {
      if (plan.wakeAtMs === null) break;
      now = Math.max(now, plan.wakeAtMs);
      continue;
    }
    const result = await execute(plan.runner, stepMs);
    now += stepMs;
    scheduler.update(plan, result, now);
    extra++;
  }
  if (scheduler.numUnfinished > 0) throw new Error(`replay: ${scheduler.numUnfinished} requests never finished (${extra} steps past the recording)`);
  if (extra > 0) diff({ index: (last?.i ?? -1) + 1, kind: 'extra', recorded: `${rec.steps.length} steps`, replayed: `${extra} more steps to finish` });
  await runner.close();
  return { run: rec.header.run, scheduler: config, numRecordedSteps: rec.steps.length, numReplayedSteps: steps + extra, numRequests: requests.size, numDiffs, diffs };
}

/** Where each request that ended on EOS (not on a stop string, which the record lists as an abort) sampled it: its last token. */
function eosPoints(rec: Recording): Map<string, number> {
  const stopped = new Set(rec.steps.flatMap((s) => s.x.filter(([, r]) => r === 'stop').map(([id]) => id)));
  const out = new Map<string, number>();
  for (const d of rec.done) if (d.o === 'stop' && !stopped.has(d.id) && d.n > 0) out.set(d.id, d.n);
  return out;
}

function makeRequest(s: SubmitLine, requests: ReadonlyMap<string, Request>, blockSize: number): Request {
  const leader = s.fork === null ? null : (requests.get(s.fork) ?? null);
  return new Request({
    id: s.id,
    promptTokens: leader?.promptTokens ?? promptFor(s, blockSize),
    maxTokens: s.m,
    sampling: { temperature: 0, topP: 1, seed: 0 },
    ignoreEos: s.ie === 1,
    arrivalMs: s.arr,
    sloMs: s.slo,
    ...(s.tpot === undefined ? {} : { tpotMs: s.tpot }),
    isEog: (t) => t === EOS_ID,
    ...(leader === null ? {} : { forkOf: leader }),
  });
}

/** Made-up prompt tokens: block j from its chained hash (equal prefixes give equal blocks), the tail from the whole prompt's. */
export function promptFor(s: SubmitLine, blockSize: number): number[] {
  const out: number[] = [];
  const first = 3; // after UNK, BOS, EOS
  const span = MOCK_VOCAB_SIZE - first;
  const fill = (seedHex: string, n: number): void => {
    let x = parseInt(seedHex, 16) >>> 0 || 1;
    for (let k = 0; k < n; k++) {
      // xorshift32
      x ^= x << 13;
      x >>>= 0;
      x ^= x >>> 17;
      x ^= x << 5;
      x >>>= 0;
      out.push(first + (x % span));
    }
  };
  for (const h of s.b) fill(h, blockSize);
  fill(s.tl, s.p - out.length);
  return out.slice(0, s.p);
}

const isEmpty = (plan: SchedulerPlan): boolean => plan.runner.items.length === 0 && plan.runner.kvOps.length === 0;
const toOut = (o: RequestOutput): Out => [o.requestId, o.newTokenIds.length, o.finishReason];
const show = (xs: readonly (readonly (string | number | null)[])[]): string => (xs.length === 0 ? '(none)' : xs.map((x) => x.map((v) => (v === null ? '-' : String(v))).join(' ')).join(', '));

function sameRows(a: readonly Row[], b: StepLine['r']): boolean {
  return a.length === b.length && a.every((r, k) => r.every((v, j) => v === b[k]![j]));
}

function sameOuts(a: readonly Out[], b: StepLine['o']): boolean {
  return a.length === b.length && a.every((r, k) => r.every((v, j) => v === b[k]![j]));
}
