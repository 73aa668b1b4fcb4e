// The generation endpoints, /v1/chat/completions, /v1/completions and /v1/responses, share one path
// of short steps; only the request shape and the response framing differ (surface.ts: a Responses
// request is parsed into a chat request and framed by responses-framer.ts):
//
//   parse → flow control → prepare (tokenize, size checks) → admission → backend.generate → frame
//
// Flow control comes before tokenizing unless a token cap is set (then right after it, with the
// counts); its ticket is released in one `finally`, so exactly once however the request ends.
// `x-headroom-priority` picks the band (flow/priority.ts).
//
// One AbortController per HTTP request: the client leaving aborts every choice in the backend.
// Detokenizing and stop strings run here, after each engine step (choice-stream.ts); a stop string
// tells the backend to stop that choice. Every stream ends with [DONE] (or the socket is gone).
//
// The caller (tenant, role) comes from the API key (server.ts); it reaches flow control. An
// operator's `x-headroom-bypass-admission: 1` skips the admission decision (not flow control, not
// the engine's own limits); anyone else asking for it gets 403. What the request log needs
// (tokens billed, first output, error code, refusal reason) is recorded on `req.facts` as it
// happens (request-log.ts).

import type { FastifyReply, FastifyRequest } from 'fastify';
import type { AdmissionContext, AdmissionController, AdmissionDecision } from '../admission/controller.ts';
import { NUM_FEATURES, extractFeatures } from '../admission/features.ts';
import type { TraceWriter } from '../admission/trace-writer.ts';
import type { Backend, Generation, GenerationJob } from '../backend/backend.ts';
import type { Refusal } from '../backend/refusal.ts';
import { REFUSALS } from '../backend/refusal.ts';
import type { RequestTimeline } from '../engine/outputs.ts';
import type { ChatOutputParser, ParsedChatOutput } from '../engine/tokenizer.ts';
import type { EngineSnapshot } from '../engine/snapshot.ts';
import type { FlowControl, FlowRequest, FlowTicket } from '../flow/flow-control.ts';
import { PRIORITY_HEADER } from '../flow/priority.ts';
import type { Observability } from '../obs/observability.ts';
import { ChoiceStream } from './choice-stream.ts';
import type { ServerConfig } from './config.ts';
import { ApiError } from './errors.ts';
import { usage } from './framer.ts';
import type { FinishedChoice, Framing, SseFrame } from './framer.ts';
import type { IdSource } from './ids.ts';
import type { LogprobEntry } from './logprob-format.ts';
import type { Prepared } from './prepare.ts';
import { sizeFacts } from './limits.ts';
import { prepare } from './prepare.ts';
import type { Surface } from './surface.ts';
import type { ActiveRequests } from './active-requests.ts';
import { SseWriter } from './sse.ts';
import type { RequestFacts } from './request-log.ts';
import { promptForLog } from './request-log.ts';

/** The operator header that skips the admission decision. */
export const BYPASS_HEADER = 'x-headroom-bypass-admission';

const NO_FEATURES = new Float64Array(0);

export interface CompletionsDeps {
  readonly backend: Backend;
  readonly config: ServerConfig;
  readonly ids: IdSource;
  readonly flow: FlowControl;
  readonly admission: AdmissionController;
  readonly obs: Observability | null;
  /** Admission traces (`--trace-out`); null = off. */
  readonly trace: TraceWriter | null;
  /** Requests in flight, so a drain deadline can cut them; null = not tracked. */
  readonly active: ActiveRequests | null;
  /** The model names this server answers to (a request's `model` must be one; responses echo it). */
  readonly models: readonly string[];
}

/** One request on its way through the handler. */
interface Call {
  readonly id: string;
  readonly prepared: Prepared;
  readonly ctx: AdmissionContext;
  readonly traceparent: string | undefined;
  readonly controller: AbortController;
  /** Set when the drain deadline cut the request: the error its client gets. */
  cutMessage: string | null;
  /** What admission saw (empty, and no snapshot, when neither admission nor the trace reads it), and what it decided. */
  features: Float64Array;
  snapshot: EngineSnapshot | null;
  decision: AdmissionDecision | null;
  /** For the request log line; also its HTTP request id, for traces. */
  readonly facts: RequestFacts;
  readonly httpRequestId: string;
}

export class CompletionsHandler {
  readonly #d: CompletionsDeps;

  constructor(deps: CompletionsDeps) {
    this.#d = deps;
  }

  async handle(surface: Surface, req: FastifyRequest, reply: FastifyReply): Promise<void> {
    const { backend, config, ids } = this.#d;
    const facts = req.facts;
    const bypass = bypassRequested(req.headers[BYPASS_HEADER]);
    if (bypass && facts.caller.role !== 'operator') {
      throw new ApiError('permission_denied', `${BYPASS_HEADER} is allowed only with an operator API key.`, { param: BYPASS_HEADER });
    }
    const budget = { slo: req.headers['x-slo-ms'], ttft: req.headers['x-slo-ttft-ms'], tpot: req.headers['x-slo-tpot-ms'] };
    const size = sizeFacts(backend);
    const request = surface.parse(req.body, this.#d.models, size);
    const flow = this.#d.flow;
    const band = flow.band(req.headers[PRIORITY_HEADER]);
    // The request's time budget runs from here: a wait in the flow-control queue spends it.
    const arrivalMs = backend.clock.nowMs();
    // A client that leaves (waiting, streaming or not) aborts its choices; the engine frees them before the next step.
    const controller = new AbortController();
    reply.raw.on('close', () => {
      if (!reply.raw.writableFinished) controller.abort();
    });
    let ticket: FlowTicket | null = null;
    try {
      // Without a token cap, flow control needs no tokens: the slot is taken before tokenizing.
      if (!flow.needsTokens) ticket = await this.#enter({ caller: facts.caller, band, inputTokens: 0, totalTokens: 0 }, facts, controller.signal);
      const prepared = await prepare(request.parsed, budget, { tokenizer: backend.tokenizer, info: backend.info, size, config, ids }).catch((e: unknown) => {
        throw e instanceof ApiError ? request.renameError(e) : e;
      });
      const id = ids.next(surface.idPrefix);
      facts.model = prepared.model;
      facts.promptTokens = prepared.promptTokens.length;
      if (config.logPrompts) {
        facts.prompt = promptForLog(req.body);
        facts.output = [];
      }
      const ctx: AdmissionContext = {
        requestId: id,
        arrivalMs,
        sloMs: prepared.sloMs,
        numPromptTokens: prepared.promptTokens.length,
        numCachedTokens: backend.peekCachedTokens(prepared.promptTokens),
        maxTokens: prepared.maxTokens,
        n: prepared.n,
        numMessages: prepared.numMessages,
        ttftBudgetMs: prepared.ttftBudgetMs,
      };
      const traceparent = typeof req.headers.traceparent === 'string' ? req.headers.traceparent : undefined;
      const call: Call = { id, prepared, ctx, traceparent, controller, cutMessage: null, features: NO_FEATURES, snapshot: null, decision: null, facts, httpRequestId: req.id };

      const inputTokens = prepared.promptTokens.length;
      ticket ??= await this.#enter({ caller: facts.caller, band, inputTokens, totalTokens: inputTokens + prepared.n * prepared.maxTokens }, facts, controller.signal, call);
      // The decision, timed whole: the engine's state as of now (a wait in the flow-control queue
      // changes it), the features, and the controller's verdict.
      const decideStart = performance.now();
      this.#see(call);
      if (bypass) {
        // No decision: the controller neither refuses it nor learns from it.
        facts.bypass = true;
        this.#d.obs?.metrics?.admissionBypassed(facts.caller.tenant);
      } else {
        const decision = this.#d.admission.decide(ctx, call.snapshot, call.features);
        call.decision = decision;
        this.#d.obs?.admissionDecided(performance.now() - decideStart);
        this.#d.obs?.decided({ requestId: id, atMs: backend.clock.nowMs(), admit: decision.admit, boundMs: decision.boundMs, budgetMs: ctx.sloMs, reason: decision.reason });
        if (!decision.admit) this.#refuse(call, decision.refusal);
      }
      // A drain deadline cuts the request: its client gets an error, the backend lets it go.
      const untrack = this.#d.active?.add((message) => {
        call.cutMessage = message;
        facts.cut = true;
        call.controller.abort();
      });
      if (untrack !== undefined) reply.raw.on('close', untrack);
      const started = backend.generate(this.#job(call), call.controller.signal);
      if (!started.ok) this.#refuse(call, started.refusal);
      const frame = request.framing(id, Math.floor(Date.now() / 1000), prepared);
      if (prepared.stream) await this.#stream(call, started.generation, frame, reply);
      else await this.#collect(call, started.generation, frame, reply);
    } finally {
      ticket?.release();
    }
  }

  /** Flow control: a ticket (maybe after a wait in its queue), or the refusal thrown. */
  async #enter(r: FlowRequest, facts: RequestFacts, signal: AbortSignal, call?: Call): Promise<FlowTicket> {
    const got = await this.#d.flow.acquire(r, signal);
    if (got.ok) return got.ticket;
    if (call !== undefined) {
      this.#see(call);
      this.#refuse(call, got.refusal);
    }
    // Before tokenizing there is no timeline to trace yet: the refusal is counted and logged.
    facts.refusal = got.refusal.reason;
    this.#d.obs?.metrics?.refused(got.refusal.reason);
    throw new ApiError(REFUSALS[got.refusal.reason].code, got.refusal.message, { retryAfterS: got.refusal.retryAfterS ?? this.#d.config.retryAfterS });
  }

  #job(call: Call): GenerationJob {
    const p = call.prepared;
    return { id: call.id, promptTokens: p.promptTokens, maxTokens: p.maxTokens, sampling: p.sampling, ignoreEos: p.ignoreEos, n: p.n, arrivalMs: call.ctx.arrivalMs, sloMs: p.sloMs, tpotMs: p.tpotBudgetMs };
  }

  /** The engine snapshot (a sort of the held requests when stale) and the features, only when admission or the trace reads them. */
  #see(call: Call): void {
    if (!this.#d.admission.needsFeatures && this.#d.trace === null) return;
    call.snapshot = this.#d.backend.snapshot();
    call.features = extractFeatures(call.ctx, call.snapshot, new Float64Array(NUM_FEATURES));
  }

  #refuse(call: Call, r: Refusal): never {
    call.facts.refusal = r.reason;
    this.#d.obs?.refused(refusedTimeline(call), r.reason, call.traceparent, call.httpRequestId);
    this.#d.trace?.refused(call.ctx, call.features, call.decision?.boundMs ?? null);
    throw new ApiError(REFUSALS[r.reason].code, r.message, { retryAfterS: r.retryAfterS ?? this.#d.config.retryAfterS });
  }

  #choices(call: Call): ChoiceStream[] {
    const p = call.prepared;
    const choices = Array.from({ length: p.n }, () => new ChoiceStream(this.#d.backend.tokenizer, p.stop, p.ignoreEos, p.chatFormat?.preservedTokens));
    call.facts.billed = choices;
    return choices;
  }

  async #collect(call: Call, gen: Generation, frame: Framing, reply: FastifyReply): Promise<void> {
    const choices = this.#choices(call);
    const texts = choices.map(() => '');
    const logprobs = choices.map((): LogprobEntry[] => []);
    const reasons: (string | null)[] = choices.map(() => null);
    let aborted = false;
    for await (const ev of gen) {
      const c = choices[ev.index]!;
      if (ev.type === 'tokens') {
        call.facts.firstOutputMs ??= performance.now();
        if (reasons[ev.index] !== null) continue;
        texts[ev.index] += c.push(ev.tokenIds, ev.logprobs);
        logprobs[ev.index]!.push(...c.takeLogprobs());
        if (c.stopped) {
          reasons[ev.index] = 'stop';
          gen.stopChoice(ev.index);
        }
        continue;
      }
      this.#finished(call, ev.index, ev.timeline);
      if (reasons[ev.index] !== null) continue;
      if (ev.reason === 'error') {
        call.controller.abort();
        throw new ApiError('engine_failure', ev.message ?? 'generation failed');
      }
      if (ev.reason === 'abort') aborted = true;
      texts[ev.index] += c.flush();
      reasons[ev.index] = ev.reason;
    }
    if (call.cutMessage !== null) throw new ApiError('engine_failure', call.cutMessage);
    if (aborted) {
      reply.hijack(); // nobody is listening: nothing to send
      reply.raw.destroy();
      return;
    }
    call.facts.output?.push(...texts);
    const wanted = call.prepared.sampling.logprobs !== undefined;
    const done: FinishedChoice[] = texts.map((text, i) => {
      const parser = this.#parser(call);
      if (parser === null) return { text, finishReason: reasons[i]!, logprobs: wanted ? logprobs[i]! : null };
      const message = finalMessage(parser.update(text, true), text);
      return { text: message.content, message, finishReason: finishWithTools(reasons[i]!, message), logprobs: null };
    });
    void reply.code(200).send(frame.whole(done, this.#usage(call, choices)));
  }

  async #stream(call: Call, gen: Generation, frame: Framing, reply: FastifyReply): Promise<void> {
    const choices = this.#choices(call);
    const ended = choices.map(() => false);
    const wantLogprobs = call.prepared.sampling.logprobs !== undefined;
    const output = call.facts.output;
    if (output !== null) choices.forEach(() => output.push(''));
    let aborted = false;
    // The headers hooks set on the reply (x-request-id, CORS) go out with the stream's own.
    const headers = replyHeaders(reply);
    reply.hijack();
    const sse = new SseWriter(reply.raw);
    const send = (frames: readonly SseFrame[]): void => frames.forEach((f) => sse.send(f.data, f.event));
    const end = (index: number, reason: string): void => {
      ended[index] = true;
      send(frame.end(index, reason));
    };
    const parsers = choices.map(() => this.#parser(call));
    const text = (index: number, t: string, lp: readonly LogprobEntry[] | null = null): void => {
      if (output !== null) output[index] += t;
      const parser = parsers[index];
      if (parser != null) send(frame.deltas(index, parser.update(t, false).deltas));
      else send(frame.text(index, t, lp));
    };
    /** A choice's end; a parsed chat output is parsed whole once more (its last deltas, and tool_calls as the finish). */
    const finish = (index: number, reason: string, tail: string): void => {
      const parser = parsers[index];
      if (parser == null) {
        if (tail.length > 0) text(index, tail);
        end(index, reason);
        return;
      }
      if (output !== null) output[index] += tail;
      const last = parser.update(tail, true);
      send(frame.deltas(index, last.deltas));
      end(index, finishWithTools(reason, finalMessage(last, '')));
    };
    try {
      sse.open(headers);
      send(frame.opening(choices.length));
      for await (const ev of gen) {
        const c = choices[ev.index]!;
        if (ev.type === 'tokens') {
          call.facts.firstOutputMs ??= performance.now();
          if (ended[ev.index]) continue;
          const t = c.push(ev.tokenIds, ev.logprobs);
          const lp = wantLogprobs ? c.takeLogprobs() : null;
          if (t.length > 0 || (lp !== null && lp.length > 0)) text(ev.index, t, lp);
          if (c.stopped) {
            gen.stopChoice(ev.index);
            finish(ev.index, 'stop', '');
          }
          continue;
        }
        this.#finished(call, ev.index, ev.timeline);
        if (ended[ev.index]) continue;
        if (ev.reason === 'abort') {
          aborted = true;
          if (call.cutMessage !== null) {
            call.facts.errorCode = 'engine_failure';
            send(frame.failure(new ApiError('engine_failure', call.cutMessage)));
            return;
          }
          continue;
        }
        if (ev.reason === 'error') {
          call.facts.errorCode = 'engine_failure';
          send(frame.failure(new ApiError('engine_failure', ev.message ?? 'generation failed')));
          call.controller.abort();
          return;
        }
        finish(ev.index, ev.reason, c.flush());
      }
      if (!aborted) send(frame.closing(this.#usage(call, choices)));
    } finally {
      if (frame.endsWithDone) sse.done();
      else sse.end();
    }
  }

  /** One choice's output parser, when the model's chat format asks for parsing (tools, reasoning). */
  #parser(call: Call): ChatOutputParser | null {
    const format = call.prepared.chatFormat;
    const tokenizer = this.#d.backend.tokenizer;
    return format === null || tokenizer.openChatParser === undefined ? null : tokenizer.openChatParser(format);
  }

  /** A choice ended in the backend (its engine outcome, which a front-end stop may precede). */
  #finished(call: Call, index: number, t: RequestTimeline): void {
    this.#d.obs?.finished(t, t.outcome ?? 'error', call.traceparent, call.httpRequestId);
    this.#d.trace?.finished(call.ctx, call.features, call.decision?.boundMs ?? null, index, t);
    if (call.decision !== null && t.outcome !== 'error') {
      const elapsed = (t.finishedMs ?? this.#d.backend.clock.nowMs()) - t.arrivalMs;
      this.#d.admission.observe(call.features, call.decision, {
        e2eMs: elapsed,
        ttftMs: t.firstTokenMs === null ? null : t.firstTokenMs - t.arrivalMs,
        censored: t.outcome === 'abort',
      });
    }
  }

  #usage(call: Call, choices: readonly ChoiceStream[]) {
    return usage(call.prepared.promptTokens.length, choices.reduce((n, c) => n + c.numTokens, 0));
  }
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
function refusedTimeline(call: Call): RequestTimeline {
  const c = call.ctx;
  return {
    requestId: call.id,
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

/** A choice that ended normally with tool calls finishes with "tool_calls", as OpenAI's do. */
function finishWithTools(reason: string, m: ParsedChatOutput): string {
  return reason === 'stop' && m.toolCalls.length > 0 ? 'tool_calls' : reason;
}

/**
 * The final parse of a choice; when the model broke its format (random weights, or a call cut
 * by max_tokens), what parsed is kept and, with nothing parsed, the raw text is the content.
 */
function finalMessage(m: ParsedChatOutput, raw: string): ParsedChatOutput {
  if (m.error === undefined || m.content !== '' || m.toolCalls.length > 0) return m;
  return { ...m, content: raw };
}
