// Engine mode's generation endpoints, /v1/chat/completions, /v1/completions and /v1/responses: one
// path of short steps; only the request shape and the response framing differ (surface.ts: a
// Responses request is parsed into a chat request and framed by responses-framer.ts):
//
//   parse → flow control → prepare (tokenize, size checks) → admission → backend.generate → frame
//
// The steps both front doors take (the bypass header, abort wiring, the flow ticket, the decision,
// refusals, the drain, each outcome to metrics, traces and the controller) are request-call.ts's;
// this file supplies engine mode's own: prepare, generate and frame. Flow control comes before
// tokenizing unless a token cap is set (then right after it, with the counts). `x-headroom-priority`
// picks the band (flow/priority.ts).
//
// Detokenizing and stop strings run here, after each engine step (choice-stream.ts); a stop string
// tells the backend to stop that choice. Every stream ends with [DONE] (or the socket is gone).
// What the request log needs (tokens billed, first output, error code, refusal reason) is recorded
// on `req.facts` as it happens (request-log.ts).

import type { FastifyReply, FastifyRequest } from 'fastify';
import type { AdmissionContext } from '../admission/controller.ts';
import type { Backend, Generation, GenerationJob } from '../backend/backend.ts';
import type { ChatOutputParser, ParsedChatOutput } from '../engine/tokenizer.ts';
import { PRIORITY_HEADER } from '../flow/priority.ts';
import { ChoiceStream } from './choice-stream.ts';
import { ApiError } from './errors.ts';
import { usage } from './framer.ts';
import type { FinishedChoice, Framing, SseFrame } from './framer.ts';
import type { IdSource } from './ids.ts';
import type { LogprobEntry } from './logprob-format.ts';
import type { Prepared } from './prepare.ts';
import { sizeFacts } from './limits.ts';
import { prepare } from './prepare.ts';
import type { FrontDoor, RequestCall } from './request-call.ts';
import { leave, replyHeaders } from './request-call.ts';
import type { Surface } from './surface.ts';
import { SseWriter } from './sse.ts';
import type { RequestFacts } from './request-log.ts';
import { promptForLog } from './request-log.ts';

/** What engine mode's steps need. */
export interface CompletionsDeps {
  /** What the shared steps read (the config, flow control, admission, observability). */
  readonly door: FrontDoor;
  readonly backend: Backend;
  readonly ids: IdSource;
  /** The model names this server answers to (a request's `model` must be one; responses echo it). */
  readonly models: readonly string[];
}

/** One request on its way through the handler: the front door's shared steps, and what engine mode prepared. */
interface Call {
  readonly id: string;
  readonly prepared: Prepared;
  readonly door: RequestCall;
  readonly facts: RequestFacts;
}

export class CompletionsHandler {
  readonly #d: CompletionsDeps;

  constructor(deps: CompletionsDeps) {
    this.#d = deps;
  }

  /** Engine mode's steps, inside the front door's (`runCall`): prepare (tokenize, size checks), then generate and frame. */
  async run(door: RequestCall, surface: Surface, req: FastifyRequest, reply: FastifyReply): Promise<void> {
    const { backend, ids } = this.#d;
    const { config, flow } = this.#d.door;
    const facts = door.facts;
    const budget = { slo: req.headers['x-slo-ms'], ttft: req.headers['x-slo-ttft-ms'], tpot: req.headers['x-slo-tpot-ms'] };
    const size = sizeFacts(backend);
    const request = surface.parse(req.body, this.#d.models, size);
    const band = flow.band(req.headers[PRIORITY_HEADER]);
    // Without a token cap, flow control needs no tokens: the slot is taken before tokenizing.
    if (!flow.needsTokens) await door.enter({ caller: facts.caller, band, inputTokens: 0, totalTokens: 0 });
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
      arrivalMs: door.arrivalMs,
      sloMs: prepared.sloMs,
      numPromptTokens: prepared.promptTokens.length,
      numCachedTokens: backend.peekCachedTokens(prepared.promptTokens),
      maxTokens: prepared.maxTokens,
      n: prepared.n,
      numMessages: prepared.numMessages,
      ttftBudgetMs: prepared.ttftBudgetMs,
    };
    // The engine's state as of the decision (a wait in the flow-control queue changes it): a sort of the held requests when stale.
    door.bind(ctx, () => backend.snapshot());
    const inputTokens = prepared.promptTokens.length;
    await door.enter({ caller: facts.caller, band, inputTokens, totalTokens: inputTokens + prepared.n * prepared.maxTokens });
    door.decide();
    door.track(reply);
    const call: Call = { id, prepared, door, facts };
    const started = backend.generate(this.#job(call), door.controller.signal);
    if (!started.ok) door.refuse(started.refusal);
    const frame = request.framing(id, Math.floor(Date.now() / 1000), prepared);
    if (prepared.stream) await this.#stream(call, started.generation, frame, reply);
    else await this.#collect(call, started.generation, frame, reply);
  }

  #job(call: Call): GenerationJob {
    const p = call.prepared;
    return { id: call.id, promptTokens: p.promptTokens, maxTokens: p.maxTokens, sampling: p.sampling, ignoreEos: p.ignoreEos, n: p.n, arrivalMs: call.door.arrivalMs, sloMs: p.sloMs, tpotMs: p.tpotBudgetMs };
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
      call.door.finished(ev.timeline, ev.index);
      if (reasons[ev.index] !== null) continue;
      if (ev.reason === 'error') {
        call.door.controller.abort();
        throw new ApiError('engine_failure', ev.message ?? 'generation failed');
      }
      if (ev.reason === 'abort') aborted = true;
      texts[ev.index] += c.flush();
      reasons[ev.index] = ev.reason;
    }
    call.door.throwIfCut();
    if (aborted) return leave(reply);
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
        call.door.finished(ev.timeline, ev.index);
        if (ended[ev.index]) continue;
        if (ev.reason === 'abort') {
          aborted = true;
          if (call.door.cutMessage !== null) {
            call.facts.errorCode = 'engine_failure';
            send(frame.failure(new ApiError('engine_failure', call.door.cutMessage)));
            return;
          }
          continue;
        }
        if (ev.reason === 'error') {
          call.facts.errorCode = 'engine_failure';
          send(frame.failure(new ApiError('engine_failure', ev.message ?? 'generation failed')));
          call.door.controller.abort();
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

  #usage(call: Call, choices: readonly ChoiceStream[]) {
    return usage(call.prepared.promptTokens.length, choices.reduce((n, c) => n + c.numTokens, 0));
  }
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
