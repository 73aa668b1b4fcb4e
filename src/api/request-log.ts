// One log line per HTTP request, written when its response is over: sent in full, or cut short
// because the client left. A stream is logged when it ends, not when its headers go out.
//
// The line carries facts the handlers recorded as they happened (RequestFacts, on the request):
// who asked (tenant), what was billed (the choice streams' token counts), when the first output
// came, which error code or refusal reason it got. Nothing is read back from response bodies.
//
//   {"level":"info","time":…,"request_id":"…","msg":"request","tenant":"default","method":"POST",
//    "route":"/v1/chat/completions","status":200,"outcome":"ok","model":"tiny","prompt_tokens":12,
//    "completion_tokens":32,"ttft_ms":8.1,"e2e_ms":74.5}
//
// Invariants:
// - Exactly one line per request that reached a route or the 404 handler (the response's `close`
//   event fires once, after `finish` or after the socket went away).
// - Prompt and output text appear only with `--log-prompts`.
// - Levels: ok and aborted at info; refused, timeout and 4xx errors at warn; 5xx errors (and an
//   engine failure reported inside a 200 stream) at error.
//   Probes and scrapes (/health, /ready, /metrics) at debug whatever their status: an orchestrator
//   polls them every few seconds, and a 503 from /ready during a drain is the drain working.

import type { FastifyReply, FastifyRequest } from 'fastify';
import type { RefusalReason } from '../backend/refusal.ts';
import type { Caller } from '../flow/flow-control.ts';
import { ANONYMOUS } from './auth.ts';
import type { ApiOutcome } from '../obs/metrics.ts';
import type { ErrorCode } from './errors.ts';
import { ERROR_CATALOG } from './errors.ts';

/** How a request ended: the log line's `outcome`, and the metric's label (obs/metrics.ts names them). */
export type Outcome = ApiOutcome;

/** What the handlers learn about a request while serving it; read once, by the log line. */
export interface RequestFacts {
  /** performance.now() when the request arrived. */
  readonly startMs: number;
  caller: Caller;
  /** The model name the request asked for (null: not a generation, or it failed before parsing). */
  model: string | null;
  promptTokens: number | null;
  /** Per choice, the completion tokens billed so far (choice-stream.ts). */
  billed: readonly { readonly numTokens: number }[];
  /** performance.now() of the first output tokens. */
  firstOutputMs: number | null;
  /** The error code sent, as a response or as a stream's error event. */
  errorCode: ErrorCode | null;
  refusal: RefusalReason | null;
  /** An operator skipped admission (x-headroom-bypass-admission). */
  bypass: boolean;
  /** Gateway: admission sent it to another upstream than the picker's first, whose bound did not fit. */
  rerouted: boolean;
  /** The drain deadline cut it. */
  cut: boolean;
  /** Prompt and output text, kept only with --log-prompts. */
  prompt: string | null;
  output: string[] | null;
}

declare module 'fastify' {
  interface FastifyRequest {
    facts: RequestFacts;
    /** The JSON body's bytes as received, kept in gateway mode (forwarded unchanged). */
    rawBody?: Buffer;
  }
}

export function newFacts(startMs: number): RequestFacts {
  return { startMs, caller: ANONYMOUS, model: null, promptTokens: null, billed: [], firstOutputMs: null, errorCode: null, refusal: null, bypass: false, rerouted: false, cut: false, prompt: null, output: null };
}

export function outcomeOf(facts: RequestFacts, status: number | null, finished: boolean): Outcome {
  if (facts.cut || status === 408) return 'timeout';
  if (!finished) return 'aborted';
  if (facts.refusal !== null || status === 429 || status === 503) return 'refused';
  if (facts.errorCode !== null || (status !== null && status >= 400)) return 'error';
  return 'ok';
}

/** Write the request's line; returns its outcome (for the metric). */
export function logRequest(req: FastifyRequest, reply: FastifyReply, opts: { readonly logPrompts: boolean; readonly probe: boolean }): Outcome {
  const logPrompts = opts.logPrompts;
  const f = req.facts;
  const raw = reply.raw;
  const status = raw.headersSent ? raw.statusCode : null;
  const outcome = outcomeOf(f, status, raw.writableFinished);
  const route = req.routeOptions.url ?? null;
  const line: Record<string, unknown> = {
    tenant: f.caller.tenant,
    method: req.method,
    route,
    ...(route === null ? { path: req.url.split('?')[0]!.slice(0, 200) } : {}),
    status,
    outcome,
    ...(f.errorCode === null ? {} : { code: f.errorCode }),
    ...(f.refusal === null ? {} : { refusal: f.refusal }),
    ...(f.bypass ? { bypass_admission: true } : {}),
    ...(f.rerouted ? { admission_rerouted: true } : {}),
    ...(f.model === null ? {} : { model: f.model }),
    ...(f.promptTokens === null ? {} : { prompt_tokens: f.promptTokens, completion_tokens: f.billed.reduce((n, c) => n + c.numTokens, 0) }),
    ...(f.firstOutputMs === null ? {} : { ttft_ms: roundMs(f.firstOutputMs - f.startMs) }),
    e2e_ms: roundMs(performance.now() - f.startMs),
    ...(logPrompts && f.prompt !== null ? { prompt: f.prompt } : {}),
    ...(logPrompts && f.output !== null ? { output: f.output } : {}),
  };
  // A server-side failure is `error` even inside a 200 stream (an engine_failure event).
  const serverSide = (status ?? 0) >= 500 || (f.errorCode !== null && ERROR_CATALOG[f.errorCode].status >= 500);
  const level = opts.probe ? 'debug' : outcome === 'ok' || outcome === 'aborted' ? 'info' : outcome === 'error' && serverSide ? 'error' : 'warn';
  req.log[level](line, 'request');
  return outcome;
}

/** Longest prompt text kept in a log line (with --log-prompts). */
const MAX_LOGGED_PROMPT_CHARS = 8192;

/** A request body's prompt as text for the log: chat messages as JSON, a completion prompt as given. */
export function promptForLog(body: unknown): string {
  const b = body as { messages?: unknown; prompt?: unknown };
  const p = b.messages ?? b.prompt;
  const text = typeof p === 'string' ? p : JSON.stringify(p) ?? '';
  return text.length > MAX_LOGGED_PROMPT_CHARS ? `${text.slice(0, MAX_LOGGED_PROMPT_CHARS)}…` : text;
}

const roundMs = (ms: number): number => Math.round(ms * 10) / 10;
