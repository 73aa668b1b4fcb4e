// The steps every request of the front door takes, in engine mode and in gateway mode alike, written
// once. A mode supplies the two steps that differ — engine mode "prepare" (tokenize, size checks) and
// "generate" (the engine's events, detokenized and framed), gateway mode "pick" (an upstream whose
// books the decision reads) and "pipe" (the upstream's bytes) — and calls these in order:
//
//   open          the operator bypass header checked; one AbortController per HTTP request, aborted
//                 when the client leaves before its answer is complete; the budget's clock starts
//   enter         flow control: a ticket, maybe after a wait in its queue, or the refusal thrown
//   bind          the admission context, once the request's size is known
//   decide        the engine's (or the picked upstream's) state read, the features, the verdict —
//                 timed whole; a bypassing operator gets no verdict, the controller learns nothing
//   track         a drain deadline can cut the request: the client gets an error, the work stops
//   finished      each admitted choice's outcome to metrics, tracing, the admission trace and the
//                 controller (E2E and TTFT; a request cut short counts censored)
//   close         the flow ticket released and the mode's own books closed, exactly once
//
// A refusal, at whichever step, is one path: the reason on the request log, the refused request's
// record to metrics and tracing, the admission trace's row, then the 503 (or 429) with Retry-After.

import type { FastifyReply, FastifyRequest } from 'fastify';
import type { AdmissionContext, AdmissionController, AdmissionDecision } from '../admission/controller.ts';
import { NUM_FEATURES, extractFeatures } from '../admission/features.ts';
import type { TraceWriter } from '../admission/trace-writer.ts';
import type { Refusal } from '../backend/refusal.ts';
import { REFUSALS } from '../backend/refusal.ts';
import type { RequestTimeline } from '../engine/outputs.ts';
import type { EngineSnapshot } from '../engine/snapshot.ts';
import type { Clock } from '../engine/clock.ts';
import type { FlowControl, FlowRequest, FlowTicket } from '../flow/flow-control.ts';
import type { Observability } from '../obs/observability.ts';
import type { ActiveRequests } from './active-requests.ts';
import type { ServerConfig } from './config.ts';
import { ApiError } from './errors.ts';
import type { RequestFacts } from './request-log.ts';

/** The operator header that skips the admission decision. */
export const BYPASS_HEADER = 'x-headroom-bypass-admission';

const NO_FEATURES = new Float64Array(0);

/** What the shared steps need from the server; both front doors hold one. */
export interface FrontDoor {
  readonly config: ServerConfig;
  readonly clock: Clock;
  readonly flow: FlowControl;
  readonly admission: AdmissionController;
  readonly obs: Observability | null;
  /** Admission traces (`--trace-out`); null = off. */
  readonly trace: TraceWriter | null;
  /** Requests in flight, so a drain deadline can cut them; null = not tracked. */
  readonly active: ActiveRequests | null;
}

/** The state a decision stands on: a snapshot (null when nothing reads it) and its features. */
export interface View {
  readonly snapshot: EngineSnapshot | null;
  readonly features: Float64Array;
}

/** One request on its way through the front door. */
export class RequestCall {
  readonly #door: FrontDoor;
  /** For the request log line (request-log.ts). */
  readonly facts: RequestFacts;
  /** The client leaving, or a drain deadline, aborts it. */
  readonly controller = new AbortController();
  /** The request's time budget runs from here: a wait in the flow-control queue spends it. */
  readonly arrivalMs: number;
  /** An operator asked to skip the admission decision. */
  readonly bypass: boolean;
  readonly traceparent: string | undefined;
  readonly httpRequestId: string;
  /** Set once the request's size is known (bind). */
  ctx: AdmissionContext | null = null;
  /** The features admission saw (empty when neither admission nor the trace reads them), and what it decided. */
  features: Float64Array = NO_FEATURES;
  decision: AdmissionDecision | null = null;
  /** Set when the drain deadline cut the request: the error its client gets. */
  cutMessage: string | null = null;
  #read: (() => EngineSnapshot | null) | null = null;
  #ticket: FlowTicket | null = null;
  readonly #closers: (() => void)[] = [];

  /** Step `open`: throws a 403 for a bypass asked without an operator key, a 400 for a malformed one. */
  constructor(door: FrontDoor, req: FastifyRequest, reply: FastifyReply) {
    this.#door = door;
    this.facts = req.facts;
    const bypass = bypassRequested(req.headers[BYPASS_HEADER]);
    if (bypass && this.facts.caller.role !== 'operator') {
      throw new ApiError('permission_denied', `${BYPASS_HEADER} is allowed only with an operator API key.`, { param: BYPASS_HEADER });
    }
    this.bypass = bypass;
    this.traceparent = typeof req.headers.traceparent === 'string' ? req.headers.traceparent : undefined;
    this.httpRequestId = req.id;
    this.arrivalMs = door.clock.nowMs();
    reply.raw.on('close', () => {
      if (!reply.raw.writableFinished) this.controller.abort();
    });
  }

  /** Whether the decision (or the trace) reads a snapshot and features. */
  get #wantsFeatures(): boolean {
    return this.#door.admission.needsFeatures || this.#door.trace !== null;
  }

  /** Step `enter`: a flow-control ticket, or the refusal thrown. A second call does nothing. */
  async enter(r: FlowRequest): Promise<void> {
    if (this.#ticket !== null) return;
    const got = await this.#door.flow.acquire(r, this.controller.signal);
    if (got.ok) this.#ticket = got.ticket;
    else {
      if (this.ctx !== null) this.#look(this.#read);
      this.refuse(got.refusal);
    }
  }

  /** Step `bind`: the admission context, and how to read the state a refusal before the decision is traced with. */
  bind(ctx: AdmissionContext, read: () => EngineSnapshot | null): void {
    this.ctx = ctx;
    this.#read = read;
  }

  /** `snapshot`'s features (empty when nothing reads them). */
  featuresOf(snapshot: EngineSnapshot | null): Float64Array {
    if (!this.#wantsFeatures || snapshot === null || this.ctx === null) return NO_FEATURES;
    return extractFeatures(this.ctx, snapshot, new Float64Array(NUM_FEATURES));
  }

  /**
   * Step `decide`, timed whole with the reading of the state it stands on: `choose` (by default the
   * bound reader) gives that state, or null when there is nothing to decide on (no upstream to send
   * it to: the backend refuses it next). A refusal is thrown; otherwise the state it stood on is returned.
   */
  decide(): void;
  decide<V extends View>(choose: () => V | null): V | null;
  decide<V extends View>(choose?: () => V | null): V | View | null {
    const start = performance.now();
    const view = choose === undefined ? this.#look(this.#read) : choose();
    if (view !== null) this.features = view.features;
    const obs = this.#door.obs;
    if (this.bypass) {
      this.facts.bypass = true;
      obs?.metrics?.admissionBypassed(this.facts.caller.tenant);
      return view;
    }
    const ctx = this.ctx;
    if (view === null || ctx === null) return view;
    const decision = this.#door.admission.decide(ctx, view.snapshot, view.features);
    this.decision = decision;
    obs?.admissionDecided(performance.now() - start);
    obs?.decided({ requestId: ctx.requestId, atMs: this.#door.clock.nowMs(), admit: decision.admit, boundMs: decision.boundMs, budgetMs: ctx.sloMs, reason: decision.reason });
    if (!decision.admit) this.refuse(decision.refusal);
    return view;
  }

  /** The state `read` gives and its features, read only when something uses them. */
  #look(read: (() => EngineSnapshot | null) | null): View {
    if (!this.#wantsFeatures || read === null) return { snapshot: null, features: NO_FEATURES };
    const snapshot = read();
    const view = { snapshot, features: this.featuresOf(snapshot) };
    this.features = view.features;
    return view;
  }

  /** A refusal, from whichever step: recorded, then thrown as the API error with its Retry-After. */
  refuse(r: Refusal): never {
    const obs = this.#door.obs;
    this.facts.refusal = r.reason;
    const ctx = this.ctx;
    if (ctx === null) obs?.metrics?.refused(r.reason); // before its size is known there is no record to trace
    else {
      obs?.refused(refusedTimeline(ctx), r.reason, this.traceparent, this.httpRequestId);
      if (this.features !== NO_FEATURES) this.#door.trace?.refused(ctx, this.features, this.decision);
    }
    throw new ApiError(REFUSALS[r.reason].code, r.message, { retryAfterS: r.retryAfterS ?? this.#door.config.retryAfterS });
  }

  /** Step `track`: until the reply closes, a drain deadline can cut the request. */
  track(reply: FastifyReply): void {
    const untrack = this.#door.active?.add((message) => {
      this.cutMessage = message;
      this.facts.cut = true;
      this.controller.abort();
    });
    if (untrack !== undefined) reply.raw.on('close', untrack);
  }

  /** Throws the error a drain deadline's cut gives its client, when it was cut. */
  throwIfCut(): void {
    if (this.cutMessage !== null) throw new ApiError('engine_failure', this.cutMessage);
  }

  /** Step `finished`: one admitted choice's outcome (`index`: its choice) to metrics, tracing, the trace and the controller. */
  finished(t: RequestTimeline, index = 0): void {
    const ctx = this.ctx;
    this.#door.obs?.finished(t, t.outcome ?? 'error', this.traceparent, this.httpRequestId);
    if (ctx !== null && this.features !== NO_FEATURES) this.#door.trace?.finished(ctx, this.features, this.decision, index, t);
    if (this.decision === null || t.outcome === 'error') return;
    this.#door.admission.observe(this.features, this.decision, {
      e2eMs: (t.finishedMs ?? this.#door.clock.nowMs()) - t.arrivalMs,
      ttftMs: t.firstTokenMs === null ? null : t.firstTokenMs - t.arrivalMs,
      censored: t.outcome === 'abort',
    });
  }

  /** Runs `f` at close, before the ticket is released (a mode's own books). */
  onClose(f: () => void): void {
    this.#closers.push(f);
  }

  /** Step `close`: in the request's one `finally`. */
  close(): void {
    for (const f of this.#closers.splice(0)) f();
    this.#ticket?.release();
    this.#ticket = null;
  }
}

/** Runs one request through `steps` with its call closed however it ends. */
export async function runCall(door: FrontDoor, req: FastifyRequest, reply: FastifyReply, steps: (call: RequestCall) => Promise<void>): Promise<void> {
  const call = new RequestCall(door, req, reply);
  try {
    await steps(call);
  } finally {
    call.close();
  }
}

/** The client left before anything was sent: nobody to answer. */
export function leave(reply: FastifyReply): void {
  reply.hijack();
  reply.raw.destroy();
}

/** `1`/`true` asks to skip admission, `0`/`false` or no header does not; anything else is a 400. */
export function bypassRequested(h: string | string[] | undefined): boolean {
  if (h === undefined) return false;
  const v = (Array.isArray(h) ? h.join(',') : h).trim().toLowerCase();
  if (v === '1' || v === 'true') return true;
  if (v === '0' || v === 'false') return false;
  throw new ApiError('invalid_value', `${BYPASS_HEADER} must be 1 or 0; got '${v.slice(0, 40)}'.`, { param: BYPASS_HEADER });
}

/** A reply's headers as plain strings, for a response written on the raw socket. */
export function replyHeaders(reply: FastifyReply): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(reply.getHeaders())) {
    if (v !== undefined) out[k] = Array.isArray(v) ? v.join(', ') : String(v);
  }
  return out;
}

/** The record a refused request leaves for metrics and tracing: it arrived, it never ran. */
function refusedTimeline(c: AdmissionContext): RequestTimeline {
  return {
    requestId: c.requestId,
    arrivalMs: c.arrivalMs,
    deadlineMs: c.arrivalMs + c.sloMs,
    scheduledMs: null,
    firstTokenMs: null,
    finishedMs: null,
    numPromptTokens: c.numPromptTokens,
    maxTokens: c.maxTokens,
    numCachedTokens: 0,
    numOutputTokens: 0,
    numPreemptions: 0,
    outcome: null,
  };
}
