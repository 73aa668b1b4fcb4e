// The generation endpoints in gateway mode: the same front door as engine mode (auth and request
// ids before this, the error catalog and the request log around it), a different back half:
//
//   envelope check (envelope.ts) → flow control → admission → backend.forward → pipe the bytes back
//
// Flow control is the same code as in engine mode; with a token cap the prompt's tokens are
// estimated from its bytes (the gateway has no tokenizer: at the bytes-per-token ratio the
// upstreams' usage reports teach, 4 until then), max_tokens × n added. Its ticket is released in
// one `finally`, whatever happens.
//
// Admission is the same controller as engine mode's, deciding on the same features, read from the
// gateway's books of what it has in flight upstream (proxy/gateway-load.ts) instead of an engine
// snapshot. A refusal is the same 503 + Retry-After. Each admitted request is entered in the books
// before it is forwarded and leaves them when its response ends, however it ends; its outcome
// (E2E and TTFT as the gateway measured them) goes back to the controller and, with
// `--trace-out`, to the trace, exactly as in engine mode, so a predictor can be trained on traces
// collected in front of the upstream.
//
// One AbortController per HTTP request: the client leaving (or the drain deadline) aborts it, which
// cancels the upstream request. A stream is piped in whole events; if the upstream fails part way,
// or ends without [DONE], the client gets an SSE error event and [DONE] (Responses streams: an
// `error` event), never a half-open stream. The gateway's own TTFT, ITL and E2E go to the same
// metrics as engine mode's (stream-meter.ts); traces get the same request record.
//
// Embeddings (`passThrough`) take a shorter path: the model checked, flow control (its request
// cap; with a token cap, the body's bytes at 4 a token), then forwarded and answered whole, with the
// same auth, request id, failover and error handling. No admission: its predictor and books know
// generation (prefill, then decode steps), not an embeddings batch; nor TTFT or E2E metrics, which
// would mix the two.

import type { FastifyReply, FastifyRequest } from 'fastify';
import type { AdmissionContext, AdmissionController, AdmissionDecision } from '../admission/controller.ts';
import { NUM_FEATURES, extractFeatures } from '../admission/features.ts';
import type { TraceWriter } from '../admission/trace-writer.ts';
import type { ForwardResponse, ForwardingBackend, Placement } from '../backend/backend.ts';
import { REFUSALS } from '../backend/refusal.ts';
import type { Refusal } from '../backend/refusal.ts';
import type { FinishReason, RequestTimeline } from '../engine/outputs.ts';
import type { FlowControl, FlowTicket } from '../flow/flow-control.ts';
import { PRIORITY_HEADER } from '../flow/priority.ts';
import type { Observability } from '../obs/observability.ts';
import type { GatewayLoad, LoadEntry } from '../proxy/gateway-load.ts';
import { DEFAULT_BYTES_PER_TOKEN } from '../proxy/gateway-load.ts';
import type { ActiveRequests } from './active-requests.ts';
import { BYPASS_HEADER, bypassRequested, replyHeaders } from './completions.ts';
import type { ServerConfig } from './config.ts';
import type { Endpoint } from './envelope.ts';
import { checkEnvelope } from './envelope.ts';
import { ApiError } from './errors.ts';
import { sloFromHeader } from './limits.ts';
import { headerMs } from './prepare.ts';
import { SseWriter } from './sse.ts';
import { StreamMeter } from './stream-meter.ts';
import type { MeterSink } from './stream-meter.ts';

export interface ForwardDeps {
  readonly backend: ForwardingBackend;
  readonly config: ServerConfig;
  readonly flow: FlowControl;
  readonly obs: Observability | null;
  readonly active: ActiveRequests | null;
  /** Decides each request after flow control (`admitAll`: no decision). */
  readonly admission: AdmissionController;
  /** Admission traces (`--trace-out`); null = off. */
  readonly trace: TraceWriter | null;
}

/** Request headers passed on to the upstream (never the client's credentials). */
const PASSED_HEADERS = ['accept', 'traceparent', 'tracestate', 'x-slo-ms', 'x-slo-ttft-ms', 'x-slo-tpot-ms', PRIORITY_HEADER] as const;
const NO_FEATURES = new Float64Array(0);

export class ForwardHandler {
  readonly #d: ForwardDeps;

  constructor(deps: ForwardDeps) {
    this.#d = deps;
  }

  async handle(endpoint: Endpoint, req: FastifyRequest, reply: FastifyReply): Promise<void> {
    const { backend, config, flow } = this.#d;
    const facts = req.facts;
    if (bypassRequested(req.headers[BYPASS_HEADER]) && facts.caller.role !== 'operator') {
      throw new ApiError('permission_denied', `${BYPASS_HEADER} is allowed only with an operator API key.`, { param: BYPASS_HEADER });
    }
    const env = checkEnvelope(endpoint, req.body, backend.models());
    const sloMs = sloFromHeader(req.headers['x-slo-ms'], config);
    const ttftBudgetMs = headerMs(req.headers['x-slo-ttft-ms'], 'x-slo-ttft-ms', config);
    const band = flow.band(req.headers[PRIORITY_HEADER]);
    facts.model = env.model;
    const arrivalMs = backend.clock.nowMs();
    const controller = new AbortController();
    reply.raw.on('close', () => {
      if (!reply.raw.writableFinished) controller.abort();
    });
    const sizer = backend.sizer ?? null;
    const promptTokens = sizer === null ? Math.max(1, Math.ceil(env.promptBytes / DEFAULT_BYTES_PER_TOKEN)) : sizer.estimateTokens(env.promptBytes);
    // The books admission reads are those of the upstream the picker would use (set after the flow-control wait).
    let load: GatewayLoad | null = null;
    let first: number | undefined;
    const maxTokens = env.maxTokens ?? config.maxOutputTokens;
    const inputTokens = flow.needsTokens ? promptTokens : 0;
    const totalTokens = inputTokens + env.n * maxTokens;
    const admission = this.#d.admission;
    const ctx: AdmissionContext = { requestId: req.id, arrivalMs, sloMs, numPromptTokens: promptTokens, numCachedTokens: 0, maxTokens, n: env.n, numMessages: env.numMessages, ttftBudgetMs };
    let features: Float64Array = NO_FEATURES;
    let decision: AdmissionDecision | null = null;
    let entry: LoadEntry | null = null;
    let ticket: FlowTicket | null = null;
    const record = (outcome: FinishReason | null, meter: StreamMeter | null): RequestTimeline => ({
      requestId: req.id,
      arrivalMs,
      deadlineMs: arrivalMs + sloMs,
      scheduledMs: null,
      firstTokenMs: meter?.firstTokenMs ?? null,
      finishedMs: outcome === null ? null : backend.clock.nowMs(),
      numPromptTokens: meter?.promptTokens ?? promptTokens,
      maxTokens,
      numCachedTokens: 0,
      numOutputTokens: meter?.numOutputTokens ?? 0,
      numPreemptions: 0,
      outcome,
    });
    const refuse: (r: Refusal) => never = (r) => {
      facts.refusal = r.reason;
      this.#d.obs?.refused(record(null, null), r.reason, traceparentOf(req), req.id);
      if (features !== NO_FEATURES) this.#d.trace?.refused(ctx, features, decision?.boundMs ?? null);
      throw new ApiError(REFUSALS[r.reason].code, r.message, { retryAfterS: r.retryAfterS ?? config.retryAfterS });
    };
    try {
      const got = await flow.acquire({ caller: facts.caller, band, inputTokens, totalTokens }, controller.signal);
      if (!got.ok) refuse(got.refusal);
      else ticket = got.ticket;
      // The decision, timed whole: where the request would go now (a wait in the flow-control queue
      // changes that), that upstream's books, the features, the verdict.
      const decideStart = performance.now();
      const bypass = facts.caller.role === 'operator' && bypassRequested(req.headers[BYPASS_HEADER]);
      // Each candidate upstream's books, read once: the snapshot the features and the verdict both use.
      const needsFeatures = admission.needsFeatures || this.#d.trace !== null;
      const view = (p: Placement) => {
        const snapshot = p.books.snapshot();
        return { place: p, snapshot, features: needsFeatures ? extractFeatures(ctx, snapshot, new Float64Array(NUM_FEATURES)) : NO_FEATURES };
      };
      const places = backend.placements?.(env.model, env.affinityKey) ?? [];
      let chosen = places.length === 0 ? null : view(places[0]!);
      // The picked upstream's bound does not fit, another's does: decide on that one instead of refusing.
      if (!bypass && admission.fits !== undefined && chosen !== null && places.length > 1 && !admission.fits(ctx, chosen.snapshot, chosen.features)) {
        for (const other of places.slice(1)) {
          const v = view(other);
          if (!admission.fits(ctx, v.snapshot, v.features)) continue;
          chosen = v;
          facts.rerouted = true;
          break;
        }
      }
      if (chosen !== null) {
        load = chosen.place.books;
        first = chosen.place.upstream;
        features = chosen.features;
      }
      if (bypass) {
        facts.bypass = true;
        this.#d.obs?.metrics?.admissionBypassed(facts.caller.tenant);
      } else if (chosen !== null) {
        decision = admission.decide(ctx, chosen.snapshot, features);
        this.#d.obs?.admissionDecided(performance.now() - decideStart);
        if (!decision.admit) refuse(decision.refusal);
      }
      entry = load?.begin({ arrivalMs, deadlineMs: arrivalMs + sloMs, promptTokens, decodeTokens: env.n * maxTokens }) ?? null;
      const call: Cut = { message: null };
      const untrack = this.#d.active?.add((message) => {
        call.message = message;
        facts.cut = true;
        controller.abort();
      });
      if (untrack !== undefined) reply.raw.on('close', untrack);
      let response: ForwardResponse;
      try {
        const result = await backend.forward({ id: req.id, model: env.model, path: req.url.split('?')[0]!, body: req.rawBody ?? Buffer.from(JSON.stringify(req.body)), headers: upstreamHeaders(req), affinityKey: env.affinityKey, stream: env.stream, ...(first === undefined ? {} : { first }) }, controller.signal);
        if (!result.ok) refuse(result.refusal);
        response = result.response;
      } catch (err) {
        if (!controller.signal.aborted) throw err;
        if (call.message !== null) throw new ApiError('engine_failure', call.message);
        // The client left before any byte: nobody to answer.
        reply.hijack();
        reply.raw.destroy();
        return;
      }
      const meter = new StreamMeter(arrivalMs, this.#sink(load, entry));
      const stream = response.status === 200 && response.contentType.toLowerCase().startsWith('text/event-stream');
      const outcome = stream ? await this.#pipe(endpoint, response, meter, call, controller, reply) : await this.#whole(response, meter, reply);
      if (!stream && outcome !== null && entry !== null) load?.wholeOutput(entry, meter.numOutputTokens, this.#d.backend.clock.nowMs());
      facts.promptTokens = meter.promptTokens;
      facts.billed = [{ numTokens: meter.numOutputTokens }];
      if (meter.promptTokens !== null) sizer?.learn(env.promptBytes, meter.promptTokens);
      if (outcome === null) return;
      this.#learn(ctx, features, decision, record(outcome, meter));
      const m = this.#d.obs?.metrics;
      if (m != null && outcome !== 'error') {
        if (meter.promptTokens !== null) m.promptTokens(meter.promptTokens);
        if (!stream) m.generationTokens(meter.numOutputTokens);
      }
      this.#d.obs?.finished(record(outcome, meter), outcome, traceparentOf(req), req.id);
    } finally {
      if (entry !== null) load?.end(entry);
      ticket?.release();
    }
  }

  /** A route forwarded as it is (embeddings): see the header. */
  async passThrough(req: FastifyRequest, reply: FastifyReply): Promise<void> {
    const { backend, config, flow } = this.#d;
    const facts = req.facts;
    // The same envelope as a Responses request: a served `model`, an `input`.
    const env = checkEnvelope('responses', req.body, backend.models());
    facts.model = env.model;
    const controller = new AbortController();
    reply.raw.on('close', () => {
      if (!reply.raw.writableFinished) controller.abort();
    });
    const body = req.rawBody ?? Buffer.from(JSON.stringify(req.body));
    const inputTokens = flow.needsTokens ? Math.max(1, Math.ceil(body.length / DEFAULT_BYTES_PER_TOKEN)) : 0;
    const refuse: (r: Refusal) => never = (r) => {
      facts.refusal = r.reason;
      this.#d.obs?.metrics?.refused(r.reason);
      throw new ApiError(REFUSALS[r.reason].code, r.message, { retryAfterS: r.retryAfterS ?? config.retryAfterS });
    };
    let ticket: FlowTicket | null = null;
    try {
      const got = await flow.acquire({ caller: facts.caller, band: flow.band(req.headers[PRIORITY_HEADER]), inputTokens, totalTokens: inputTokens }, controller.signal);
      if (!got.ok) refuse(got.refusal);
      else ticket = got.ticket;
      let response: ForwardResponse;
      try {
        const result = await backend.forward({ id: req.id, model: env.model, path: req.url.split('?')[0]!, body, headers: upstreamHeaders(req), affinityKey: [], stream: false }, controller.signal);
        if (!result.ok) refuse(result.refusal);
        response = result.response;
      } catch (err) {
        if (!controller.signal.aborted) throw err;
        reply.hijack();
        reply.raw.destroy();
        return;
      }
      const parts: Uint8Array[] = [];
      for await (const chunk of response.body) parts.push(chunk);
      await reply.code(response.status).header('content-type', response.contentType).send(Buffer.concat(parts));
    } finally {
      ticket?.release();
    }
  }

  /** An admitted request's outcome: to the trace, and (when decided on) to the controller. */
  #learn(ctx: AdmissionContext, features: Float64Array, decision: AdmissionDecision | null, t: RequestTimeline): void {
    if (features !== NO_FEATURES) this.#d.trace?.finished(ctx, features, decision?.boundMs ?? null, 0, t);
    if (decision === null || t.outcome === 'error') return;
    this.#d.admission.observe(features, decision, {
      e2eMs: (t.finishedMs ?? this.#d.backend.clock.nowMs()) - t.arrivalMs,
      ttftMs: t.firstTokenMs === null ? null : t.firstTokenMs - t.arrivalMs,
      censored: t.outcome === 'abort',
    });
  }

  /** TTFT and ITL into the shared histograms, tokens into the generation counter; output into the books. */
  #sink(load: GatewayLoad | null, entry: LoadEntry | null): MeterSink | null {
    const m = this.#d.obs?.metrics ?? null;
    const clock = this.#d.backend.clock;
    if (m === null && entry === null) return null;
    return {
      firstToken: (ms) => {
        m?.ttft.observe(ms / 1000);
        m?.generationTokens(1);
        if (entry !== null) load?.output(entry, 1, 0, clock.nowMs());
      },
      tokens: (count, gapMs) => {
        if (m !== null) {
          for (let i = 0; i < count; i++) m.itl.observe(gapMs / 1000);
          m.generationTokens(count);
        }
        if (entry !== null) load?.output(entry, count, gapMs, clock.nowMs());
      },
    };
  }

  /** A non-streamed answer (a completion, or an upstream's error): status, content type and body as they came. Null: not a generation that finished. */
  async #whole(response: ForwardResponse, meter: StreamMeter, reply: FastifyReply): Promise<FinishReason | null> {
    const parts: Uint8Array[] = [];
    for await (const chunk of response.body) parts.push(chunk);
    const body = Buffer.concat(parts);
    if (response.status === 200) meter.whole(body);
    await reply.code(response.status).header('content-type', response.contentType).send(body);
    return response.status === 200 ? finishOf(meter.finishReason) : null;
  }

  /** A stream, event by event; ends with an error event (and [DONE]) if the upstream failed or the drain cut it. */
  async #pipe(endpoint: Endpoint, response: ForwardResponse, meter: StreamMeter, call: Cut, controller: AbortController, reply: FastifyReply): Promise<FinishReason> {
    const facts = reply.request.facts;
    const headers = replyHeaders(reply);
    reply.hijack();
    const sse = new SseWriter(reply.raw);
    const clock = this.#d.backend.clock;
    let failure: string | null = null;
    try {
      // The upstream's headers are in; its first bytes usually are too: ours go out with them.
      sse.open({ ...headers, 'content-type': response.contentType }, false);
      for await (const chunk of response.body) {
        const now = clock.nowMs();
        sse.raw(chunk);
        facts.firstOutputMs ??= performance.now();
        meter.events(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength), now);
      }
      if (endpoint !== 'responses' && !meter.sawDone) failure = 'The upstream ended the stream before it was complete.';
    } catch (err) {
      if (call.message !== null) failure = call.message;
      else if (!controller.signal.aborted) failure = `The upstream failed mid-stream: ${(err as Error).message}`;
    } finally {
      if (failure !== null) {
        facts.errorCode = 'engine_failure';
        const e = new ApiError('engine_failure', failure).toBody();
        if (endpoint === 'responses') sse.send({ type: 'error', code: e.error.code, message: e.error.message, param: null }, 'error');
        else sse.send(e);
        if (endpoint !== 'responses' && !meter.sawDone) sse.done();
      }
      sse.end();
    }
    if (failure !== null) return call.message !== null ? 'abort' : 'error';
    if (controller.signal.aborted) return 'abort';
    if (meter.sawError) return 'error';
    return finishOf(meter.finishReason);
  }
}

/** Set when the drain deadline cut the request: the message its client gets. */
interface Cut {
  message: string | null;
}

function finishOf(reason: string | null): FinishReason {
  return reason === 'length' ? 'length' : 'stop';
}

function traceparentOf(req: FastifyRequest): string | undefined {
  return typeof req.headers.traceparent === 'string' ? req.headers.traceparent : undefined;
}

function upstreamHeaders(req: FastifyRequest): Record<string, string> {
  const out: Record<string, string> = { 'content-type': 'application/json', 'x-request-id': req.id };
  for (const h of PASSED_HEADERS) {
    const v = req.headers[h];
    if (typeof v === 'string') out[h] = v;
  }
  return out;
}
