// The flight recorder's file format: JSON lines, one record per line, short keys. Every segment
// file starts with the run's header (so a segment is readable alone once older ones are deleted);
// the other lines are steps, decisions, finishes and refusals in the order they happened.
//
//   {"t":"header","format":"headroom-recording","v":1,"run":"…","segment":1,"startedAt":"ISO","clockAtStartMs":…,"version":"0.1.0","meta":{…}}
//   {"t":"submit","id":"cmpl-1","at":100.95,"arr":100.9,"slo":5000,"p":160,"m":32,"ie":1,"fork":null,"b":["9e3779b9",…],"tl":"0badf00d"}
//   {"t":"step","i":12,"s":105.2,"e":109.8,"c":4.1,"k":"mixed","a":["cmpl-1"],"x":[["cmpl-0","abort"]],"kv":2,"r":[["cmpl-1",160,0,1]],"ok":1,"o":[["cmpl-1",1,null]]}
//   {"t":"decision","id":"cmpl-1","at":101.0,"admit":1,"bound":812.5,"budget":5000,"why":"fits"}
//   {"t":"done","id":"cmpl-1","arr":100.9,"dl":5100.9,"sch":105.2,"ft":109.8,"fin":230.4,"p":160,"m":32,"cached":0,"n":32,"pre":0,"o":"length"}
//   {"t":"refused","id":"cmpl-2","at":102.3,"arr":102.1,"dl":5102.1,"p":160,"m":32,"why":"conformal"}
//   {"t":"end","at":…,"dropped":0}
//
// Times are the engine clock in ms (monotonic; wall time = startedAt + (t − clockAtStartMs)). A
// step's rows `r` are [requestId, tokens fed, start position, sampled 0|1]; its outputs `o` are
// [requestId, tokens gained, finish reason or null]. Token ids, prompts and sampling settings are
// not written: the recorder holds no user text, and a row's token count is what a schedule is. A
// submit line carries what replay needs instead: the prompt's shape as a chain of 32-bit hashes,
// one per full KV block (`b`, block j's hash covers blocks 0..j) and one of the whole prompt (`tl`),
// so prompts that shared a prefix share it again when replay makes up their tokens.

import type { RefusalReason } from '../../backend/refusal.ts';
import type { FinishReason, RequestTimeline } from '../../engine/outputs.ts';
import type { Request } from '../../engine/request.ts';
import type { StepKind, StepRecord } from '../../engine/step-record.ts';
import type { DecisionEvent } from '../run-listener.ts';

export const RECORDING_FORMAT = 'headroom-recording';
export const RECORDING_VERSION = 1;

export interface HeaderLine {
  readonly t: 'header';
  readonly format: typeof RECORDING_FORMAT;
  readonly v: number;
  /** The run's name (its folder under the --record directory). */
  readonly run: string;
  /** 1, 2, ... : which segment file this header opens. */
  readonly segment: number;
  /** Wall time when recording started, ISO 8601. */
  readonly startedAt: string;
  /** The engine clock at `startedAt`, ms. */
  readonly clockAtStartMs: number;
  /** Headroom's version. */
  readonly version: string;
  /** Model, runner, scheduler and server settings, the effective configuration. */
  readonly meta: Readonly<Record<string, unknown>>;
}

export interface SubmitLine {
  readonly t: 'submit';
  readonly id: string;
  /** Engine clock when the engine took it. */
  readonly at: number;
  readonly arr: number;
  /** Latency budget, ms (deadline − arrival). */
  readonly slo: number;
  readonly p: number;
  readonly m: number;
  /** 1: ignore_eos. */
  readonly ie: 0 | 1;
  /** Parallel sampling: the id of the choice whose prompt this one shares. */
  readonly fork: string | null;
  readonly b: readonly string[];
  readonly tl: string;
  /** TPOT budget, ms (x-slo-tpot-ms); absent when the request had none. */
  readonly tpot?: number;
}

export interface StepLine {
  readonly t: 'step';
  readonly i: number;
  readonly s: number;
  readonly e: number;
  readonly c: number | null;
  readonly k: StepKind;
  readonly a: readonly string[];
  readonly x: readonly (readonly [string, string])[];
  /** KV operations before the forward pass. */
  readonly kv: number;
  readonly r: readonly (readonly [string, number, number, 0 | 1])[];
  /** 1: the runner succeeded; else its failure reason. */
  readonly ok: 1 | string;
  readonly o: readonly (readonly [string, number, FinishReason | null])[];
}

export interface DecisionLine {
  readonly t: 'decision';
  readonly id: string;
  readonly at: number;
  readonly admit: 0 | 1;
  readonly bound: number | null;
  readonly budget: number;
  readonly why: string;
}

export interface DoneLine {
  readonly t: 'done';
  readonly id: string;
  readonly arr: number;
  readonly dl: number;
  readonly sch: number | null;
  readonly ft: number | null;
  readonly fin: number | null;
  readonly p: number;
  readonly m: number;
  readonly cached: number;
  readonly n: number;
  readonly pre: number;
  readonly o: FinishReason;
}

export interface RefusedLine {
  readonly t: 'refused';
  readonly id: string;
  readonly at: number;
  readonly arr: number;
  readonly dl: number;
  readonly p: number;
  readonly m: number;
  readonly why: RefusalReason;
}

export interface EndLine {
  readonly t: 'end';
  readonly at: number;
  /** Records dropped because the writer fell behind or one was larger than a segment. */
  readonly dropped: number;
}

export type RecordLine = HeaderLine | SubmitLine | StepLine | DecisionLine | DoneLine | RefusedLine | EndLine;

/** Three decimals of a ms: µs resolution, shorter lines. */
const ms = (x: number): number => Math.round(x * 1000) / 1000;
const msOrNull = (x: number | null): number | null => (x === null ? null : ms(x));

export function stepLine(r: StepRecord): StepLine {
  return {
    t: 'step',
    i: r.index,
    s: ms(r.startMs),
    e: ms(r.endMs),
    c: msOrNull(r.computeMs),
    k: r.kind,
    a: r.arrivals,
    x: r.aborts.map((a) => [a.requestId, a.reason] as const),
    kv: r.plan.kvOps.length,
    r: r.plan.items.map((it) => [it.requestId, it.tokens.length, it.startPos, it.sample ? 1 : 0] as const),
    ok: r.result.ok ? 1 : r.result.reason,
    o: r.outputs.map((o) => [o.requestId, o.newTokenIds.length, o.finishReason] as const),
  };
}

/** FNV-1a over 32-bit words, continuing from `h`. */
export function fnv(h: number, tokens: readonly number[], from = 0, to = tokens.length): number {
  for (let i = from; i < to; i++) {
    const t = tokens[i]!;
    for (let k = 0; k < 4; k++) {
      h ^= (t >>> (8 * k)) & 0xff;
      h = Math.imul(h, 0x01000193) >>> 0;
    }
  }
  return h;
}

const hex = (h: number): string => h.toString(16).padStart(8, '0');
const FNV_SEED = 0x811c9dc5;

/** O(prompt tokens): on the API's path at submit, never on the step loop. */
export function submitLine(req: Request, atMs: number, blockSize: number): SubmitLine {
  const tokens = req.promptTokens;
  const b: string[] = [];
  let h = FNV_SEED;
  for (let j = 0; (j + 1) * blockSize <= tokens.length; j++) {
    h = fnv(h, tokens, j * blockSize, (j + 1) * blockSize);
    b.push(hex(h));
  }
  return {
    t: 'submit',
    id: req.id,
    at: ms(atMs),
    arr: ms(req.arrivalMs),
    slo: ms(req.deadlineMs - req.arrivalMs),
    p: tokens.length,
    m: req.maxTokens,
    ie: req.ignoreEos ? 1 : 0,
    fork: req.forkOf?.id ?? null,
    b,
    tl: hex(fnv(FNV_SEED, tokens)),
    ...(req.tpotMs === null ? {} : { tpot: req.tpotMs }),
  };
}

export function decisionLine(d: DecisionEvent): DecisionLine {
  return { t: 'decision', id: d.requestId, at: ms(d.atMs), admit: d.admit ? 1 : 0, bound: msOrNull(d.boundMs), budget: d.budgetMs, why: d.reason };
}

export function doneLine(t: RequestTimeline, reason: FinishReason): DoneLine {
  return {
    t: 'done',
    id: t.requestId,
    arr: ms(t.arrivalMs),
    dl: ms(t.deadlineMs),
    sch: msOrNull(t.scheduledMs),
    ft: msOrNull(t.firstTokenMs),
    fin: msOrNull(t.finishedMs),
    p: t.numPromptTokens,
    m: t.maxTokens,
    cached: t.numCachedTokens,
    n: t.numOutputTokens,
    pre: t.numPreemptions,
    o: reason,
  };
}

export function refusedLine(t: RequestTimeline, reason: RefusalReason, atMs: number): RefusedLine {
  return { t: 'refused', id: t.requestId, at: ms(atMs), arr: ms(t.arrivalMs), dl: ms(t.deadlineMs), p: t.numPromptTokens, m: t.maxTokens, why: reason };
}
