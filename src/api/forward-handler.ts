// The generation endpoints in gateway mode: the same front door as engine mode (auth and request
// ids before this, the error catalog and the request log around it, and the shared steps of
// request-call.ts: bypass, abort wiring, flow ticket, decision, refusal, drain, outcomes), a
// different back half — "pick" and "pipe" where engine mode has "prepare" and "generate":
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
import type { ForwardResponse, ForwardingBackend, GatewayLoad, LoadEntry, Placement } from '../backend/backend.ts';
import type { FinishReason } from '../engine/outputs.ts';
import { PRIORITY_HEADER } from '../flow/priority.ts';
import { DEFAULT_BYTES_PER_TOKEN } from '../proxy/gateway-load.ts';
import type { Endpoint } from './envelope.ts';
import { checkEnvelope } from './envelope.ts';
import { ApiError } from './errors.ts';
import { sloFromHeader } from './limits.ts';
import { headerMs } from './prepare.ts';
import type { FrontDoor, RequestCall } from './request-call.ts';
import { leave, replyHeaders } from './request-call.ts';
import { SseWriter } from './sse.ts';
import { StreamMeter } from './stream-meter.ts';
import type { MeterSink } from './stream-meter.ts';

/** Request headers passed on to the upstream (never the client's credentials). */
const PASSED_HEADERS = ['accept', 'traceparent', 'tracestate', 'x-slo-ms', 'x-slo-ttft-ms', 'x-slo-tpot-ms', PRIORITY_HEADER] as const;

export class ForwardHandler {
  readonly #door: FrontDoor;
  readonly #backend: ForwardingBackend;

  constructor(door: FrontDoor, backend: ForwardingBackend) {
    this.#door = door;
    this.#backend = backend;
  }

  /** Gateway mode's steps, inside the front door's (`runCall`): pick an upstream whose books the decision reads, forward, pipe the answer back. */
  async run(call: RequestCall, endpoint: Endpoint, req: FastifyRequest, reply: FastifyReply): Promise<void> {
    const backend = this.#backend;
    const { config, flow, admission } = this.#door;
    const facts = call.facts;
    const env = checkEnvelope(endpoint, req.body, backend.models());
    const sloMs = sloFromHeader(req.headers['x-slo-ms'], config);
    const ttftBudgetMs = headerMs(req.headers['x-slo-ttft-ms'], 'x-slo-ttft-ms', config);
    const band = flow.band(req.headers[PRIORITY_HEADER]);
    facts.model = env.model;
    const arrivalMs = call.arrivalMs;
    const sizer = backend.sizer ?? null;
    const promptTokens = sizer === null ? Math.max(1, Math.ceil(env.promptBytes / DEFAULT_BYTES_PER_TOKEN)) : sizer.estimateTokens(env.promptBytes);
    const maxTokens = env.maxTokens ?? config.maxOutputTokens;
    const inputTokens = flow.needsTokens ? promptTokens : 0;
    const places = (): readonly Placement[] => backend.placements?.(env.model, env.affinityKey) ?? [];
    // The books admission reads are those of the upstream the picker would use (read after the flow-control wait).
    call.bind({ requestId: req.id, arrivalMs, sloMs, numPromptTokens: promptTokens, numCachedTokens: 0, maxTokens, n: env.n, numMessages: env.numMessages, ttftBudgetMs }, () => places()[0]?.books.snapshot() ?? null);
    await call.enter({ caller: facts.caller, band, inputTokens, totalTokens: inputTokens + env.n * maxTokens });
    const picked = call.decide(() => {
      const ctx = call.ctx!;
      // Each candidate upstream's books, read once: the snapshot the features and the verdict both use.
      const view = (p: Placement) => {
        const snapshot = p.books.snapshot();
        return { place: p, snapshot, features: call.featuresOf(snapshot) };
      };
      const all = places();
      let v = all.length === 0 ? null : view(all[0]!);
      // The picked upstream's bound does not fit, another's does: decide on that one instead of refusing.
      if (!call.bypass && admission.fits !== undefined && v !== null && all.length > 1 && !admission.fits(ctx, v.snapshot, v.features)) {
        for (const other of all.slice(1)) {
          const o = view(other);
          if (!admission.fits(ctx, o.snapshot, o.features)) continue;
          v = o;
          facts.rerouted = true;
          break;
        }
      }
      return v;
    });
    const chosen = picked?.place ?? null;
    const load: GatewayLoad | null = chosen?.books ?? null;
    const first = chosen?.upstream;
    const entry = load?.begin({ arrivalMs, deadlineMs: arrivalMs + sloMs, promptTokens, decodeTokens: env.n * maxTokens }) ?? null;
    if (entry !== null) call.onClose(() => load?.end(entry));
    call.track(reply);
    const controller = call.controller;
    let response: ForwardResponse;
    try {
      const result = await backend.forward({ id: req.id, model: env.model, path: req.url.split('?')[0]!, body: req.rawBody ?? Buffer.from(JSON.stringify(req.body)), headers: upstreamHeaders(req), affinityKey: env.affinityKey, stream: env.stream, ...(first === undefined ? {} : { first }) }, controller.signal);
      if (!result.ok) call.refuse(result.refusal);
      response = result.response;
    } catch (err) {
      if (!controller.signal.aborted) throw err;
      call.throwIfCut();
      return leave(reply);
    }
    const meter = new StreamMeter(arrivalMs, this.#sink(load, entry));
    const stream = response.status === 200 && response.contentType.toLowerCase().startsWith('text/event-stream');
    const outcome = stream ? await this.#pipe(endpoint, response, meter, call, reply) : await this.#whole(response, meter, reply);
    if (!stream && outcome !== null && entry !== null) load?.wholeOutput(entry, meter.numOutputTokens, backend.clock.nowMs());
    // A single choice's length, ended on its own or at its cap, teaches the books how long outputs run.
    if (entry !== null && env.n === 1 && (outcome === 'stop' || outcome === 'length')) load?.outputEnded(entry, outcome === 'stop');
    facts.promptTokens = meter.promptTokens;
    facts.billed = [{ numTokens: meter.numOutputTokens }];
    if (meter.promptTokens !== null) sizer?.learn(env.promptBytes, meter.promptTokens);
    if (outcome === null) return;
    const m = this.#door.obs?.metrics;
    if (m != null && outcome !== 'error') {
      if (meter.promptTokens !== null) m.promptTokens(meter.promptTokens);
      if (!stream) m.generationTokens(meter.numOutputTokens);
    }
    call.finished({
      requestId: req.id,
      arrivalMs,
      deadlineMs: arrivalMs + sloMs,
      scheduledMs: null,
      firstTokenMs: meter.firstTokenMs,
      finishedMs: backend.clock.nowMs(),
      numPromptTokens: meter.promptTokens ?? promptTokens,
      maxTokens,
      numCachedTokens: 0,
      numOutputTokens: meter.numOutputTokens,
      numPreemptions: 0,
      outcome,
    });
  }

  /** A route forwarded as it is (embeddings): see the header. */
  async passThrough(call: RequestCall, req: FastifyRequest, reply: FastifyReply): Promise<void> {
    const backend = this.#backend;
    const flow = this.#door.flow;
    // The same envelope as a Responses request: a served `model`, an `input`.
    const env = checkEnvelope('responses', req.body, backend.models());
    call.facts.model = env.model;
    const body = req.rawBody ?? Buffer.from(JSON.stringify(req.body));
    const inputTokens = flow.needsTokens ? Math.max(1, Math.ceil(body.length / DEFAULT_BYTES_PER_TOKEN)) : 0;
    await call.enter({ caller: call.facts.caller, band: flow.band(req.headers[PRIORITY_HEADER]), inputTokens, totalTokens: inputTokens });
    let response: ForwardResponse;
    try {
      const result = await backend.forward({ id: req.id, model: env.model, path: req.url.split('?')[0]!, body, headers: upstreamHeaders(req), affinityKey: [], stream: false }, call.controller.signal);
      if (!result.ok) call.refuse(result.refusal);
      response = result.response;
    } catch (err) {
      if (!call.controller.signal.aborted) throw err;
      return leave(reply);
    }
    const parts: Uint8Array[] = [];
    for await (const chunk of response.body) parts.push(chunk);
    await reply.code(response.status).header('content-type', response.contentType).send(Buffer.concat(parts));
  }

  /** TTFT and ITL into the shared histograms, tokens into the generation counter; output into the books. */
  #sink(load: GatewayLoad | null, entry: LoadEntry | null): MeterSink | null {
    const m = this.#door.obs?.metrics ?? null;
    const clock = this.#backend.clock;
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
  async #pipe(endpoint: Endpoint, response: ForwardResponse, meter: StreamMeter, call: RequestCall, reply: FastifyReply): Promise<FinishReason> {
    const facts = call.facts;
    const controller = call.controller;
    const headers = replyHeaders(reply);
    reply.hijack();
    const sse = new SseWriter(reply.raw);
    const clock = this.#backend.clock;
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
      if (call.cutMessage !== null) failure = call.cutMessage;
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
    if (failure !== null) return call.cutMessage !== null ? 'abort' : 'error';
    if (controller.signal.aborted) return 'abort';
    if (meter.sawError) return 'error';
    return finishOf(meter.finishReason);
  }
}

function finishOf(reason: string | null): FinishReason {
  return reason === 'length' ? 'length' : 'stop';
}

function upstreamHeaders(req: FastifyRequest): Record<string, string> {
  const out: Record<string, string> = { 'content-type': 'application/json', 'x-request-id': req.id };
  for (const h of PASSED_HEADERS) {
    const v = req.headers[h];
    if (typeof v === 'string') out[h] = v;
  }
  return out;
}
