// The two generation endpoints, /v1/chat/completions and /v1/completions, share one path:
// validate → tokenize → size-check → submit to the engine → stream or collect → respond.
// Only the request shape and the response framing differ.

import { randomBytes } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Engine } from '../engine/engine.ts';
import type { RequestEvent } from '../engine/request.ts';
import { Request } from '../engine/request.ts';
import { ApiError } from './errors.ts';
import type { ChatCompletionBody, CompletionBody } from './schemas.ts';
import { chatCompletionBody, checkSupported, completionBody, messageText, parseBody } from './schemas.ts';
import { SseWriter } from './sse.ts';
import type { ServerConfig } from './config.ts';
import type { Observability } from '../obs/observability.ts';
import { checkMessageCount, checkMessagesSize, checkPromptSize, sloFromHeader } from './limits.ts';
import type { ActiveRequests } from './active-requests.ts';

type Kind = 'chat' | 'completion';
type Finish = Extract<RequestEvent, { type: 'finish' }>;

interface Prepared {
  readonly body: ChatCompletionBody | CompletionBody;
  readonly promptTokens: number[];
}

export class CompletionsHandler {
  readonly #engine: Engine;
  readonly #config: ServerConfig;
  readonly #obs: Observability | null;
  readonly #active: ActiveRequests | null;

  constructor(engine: Engine, config: ServerConfig, obs: Observability | null = null, active: ActiveRequests | null = null) {
    this.#engine = engine;
    this.#config = config;
    this.#obs = obs;
    this.#active = active;
  }

  async handle(kind: Kind, req: FastifyRequest, reply: FastifyReply): Promise<void> {
    const sloMs = sloFromHeader(req.headers['x-slo-ms'], this.#config);
    const { body, promptTokens } = await this.#prepare(kind, req.body);
    const runner = this.#engine.runner;
    const ctx = runner.info.contextTokens;
    const requested = body.max_completion_tokens ?? body.max_tokens ?? null;
    if (promptTokens.length >= ctx) {
      throw new ApiError('context_length_exceeded', `This model's maximum context length is ${ctx} tokens; the prompt has ${promptTokens.length}.`, { param: kind === 'chat' ? 'messages' : 'prompt' });
    }
    if (requested !== null && promptTokens.length + requested > ctx) {
      throw new ApiError('context_length_exceeded', `This model's maximum context length is ${ctx} tokens; you requested ${promptTokens.length + requested} (${promptTokens.length} in the prompt, ${requested} for the completion).`, { param: body.max_completion_tokens != null ? 'max_completion_tokens' : 'max_tokens' });
    }
    if (requested !== null && requested > this.#config.maxOutputTokens) {
      throw new ApiError('invalid_value', `max_tokens is at most ${this.#config.maxOutputTokens} on this server; got ${requested}.`, { param: 'max_tokens' });
    }
    const maxTokens = requested ?? Math.min(this.#config.maxOutputTokens, ctx - promptTokens.length);
    const stop = body.stop == null ? [] : typeof body.stop === 'string' ? [body.stop] : body.stop;
    const id = `${kind === 'chat' ? 'chatcmpl' : 'cmpl'}-${randomBytes(12).toString('hex')}`;
    const created = Math.floor(Date.now() / 1000);
    const model = body.model;
    const stream = body.stream === true;
    const includeUsage = stream && body.stream_options?.include_usage === true;
    const obs = this.#obs;
    const traceparent = typeof req.headers.traceparent === 'string' ? req.headers.traceparent : undefined;

    const events: RequestEvent[] = [];
    let notify: (() => void) | null = null;
    const request = new Request({
      id,
      promptTokens,
      maxTokens,
      sampling: { temperature: body.temperature ?? 1, topP: body.top_p ?? 1, seed: body.seed ?? randomBytes(4).readUInt32LE() },
      stop,
      ignoreEos: body.ignore_eos === true,
      arrivalMs: this.#engine.now(),
      sloMs,
      detokenizer: runner.detokenizer(),
      isEog: (t) => runner.isEog(t),
      onEvent: (ev) => {
        if (ev.type === 'finish') obs?.finished(request, ev.reason, traceparent);
        events.push(ev);
        notify?.();
      },
    });
    const decideMs = performance.now();
    const submitted = this.#engine.submit(request);
    obs?.admissionDecided(performance.now() - decideMs);
    if (!submitted.ok) {
      obs?.refused(request, submitted.reason, traceparent);
      const msg = submitted.reason === 'draining' ? 'The server is shutting down; retry on another replica.' : 'The server holds as many requests as it can; retry shortly.';
      throw new ApiError(submitted.reason, msg, { retryAfterS: this.#config.retryAfterS });
    }
    // A client that leaves (stream or not) aborts its request; the engine frees it before the next step.
    reply.raw.on('close', () => {
      if (!reply.raw.writableFinished) this.#engine.abort(request);
    });
    // A drain deadline cuts the request: an error finish first, then the engine lets it go.
    const untrack = this.#active?.add((message) => {
      events.push({ type: 'finish', reason: 'error', promptTokens: promptTokens.length, completionTokens: request.outputTokens.length, message });
      notify?.();
      this.#engine.abort(request);
    });
    if (untrack !== undefined) reply.raw.on('close', untrack);
    const next = async (): Promise<RequestEvent> => {
      while (events.length === 0) await new Promise<void>((r) => (notify = r));
      notify = null;
      return events.shift()!;
    };
    const frame = new Framer(kind, id, created, model, includeUsage);

    if (!stream) {
      let text = '';
      for (;;) {
        const ev = await next();
        if (ev.type === 'delta') text += ev.text;
        else return this.#finishJson(reply, frame, text, ev);
      }
    }

    reply.hijack();
    const sse = new SseWriter(reply.raw);
    try {
      sse.open({ 'x-request-id': id });
      if (kind === 'chat') sse.send(frame.chunk({ role: 'assistant', content: '' }, null));
      for (;;) {
        const ev = await next();
        if (ev.type === 'delta') {
          sse.send(frame.chunk(ev.text, null));
          continue;
        }
        if (ev.reason === 'abort') return;
        if (ev.reason === 'error') {
          sse.send(new ApiError('engine_failure', ev.message ?? 'generation failed').toBody());
          return;
        }
        sse.send(frame.chunk(kind === 'chat' ? {} : '', ev.reason));
        if (includeUsage) sse.send(frame.usageChunk(ev));
        return;
      }
    } finally {
      sse.done();
    }
  }

  async #prepare(kind: Kind, raw: unknown): Promise<Prepared> {
    const runner = this.#engine.runner;
    if (kind === 'chat') {
      checkMessageCount(runner.info, raw);
      const body = parseBody(chatCompletionBody, raw);
      this.#checkModel(body.model);
      checkSupported(body);
      const messages = body.messages.map((m) => ({ role: m.role, content: messageText(m.content) }));
      checkMessagesSize(runner.info, messages.map((m) => m.content), body.max_completion_tokens ?? body.max_tokens ?? null);
      const encoded = await runner.encodeChat(messages);
      if (!encoded.ok) throw new ApiError('unsupported_value', encoded.message, { param: 'messages' });
      return { body, promptTokens: encoded.tokens };
    }
    const body = parseBody(completionBody, raw);
    this.#checkModel(body.model);
    checkSupported(body);
    const p = body.prompt;
    if (typeof p === 'string' || typeof p[0] === 'string') {
      const text = typeof p === 'string' ? p : (p[0] as string);
      if (text.length === 0) throw new ApiError('invalid_value', 'The prompt must not be empty.', { param: 'prompt' });
      checkPromptSize(runner.info, text, body.max_completion_tokens ?? body.max_tokens ?? null);
      return { body, promptTokens: await runner.encodeText(text, true) };
    }
    const ids = p as number[];
    const bad = ids.find((t) => t >= runner.info.vocabSize);
    if (bad !== undefined) throw new ApiError('invalid_value', `Token id ${bad} is outside the vocabulary [0, ${runner.info.vocabSize}).`, { param: 'prompt' });
    return { body, promptTokens: [...ids] };
  }

  #checkModel(model: string): void {
    const served = this.#engine.runner.info.modelId;
    if (model !== served) {
      throw new ApiError('model_not_found', `The model '${model}' does not exist on this server; it serves '${served}'.`, { param: 'model' });
    }
  }

  #finishJson(reply: FastifyReply, frame: Framer, text: string, ev: Finish): void {
    if (ev.reason === 'abort') {
      reply.hijack(); // nobody is listening: nothing to send
      reply.raw.destroy();
      return;
    }
    if (ev.reason === 'error') throw new ApiError('engine_failure', ev.message ?? 'generation failed');
    void reply.code(200).send(frame.whole(text, ev));
  }
}

/** OpenAI response shapes for one request. */
class Framer {
  constructor(
    readonly kind: Kind,
    readonly id: string,
    readonly created: number,
    readonly model: string,
    readonly includeUsage: boolean,
  ) {}

  chunk(delta: string | { role?: string; content?: string }, finishReason: string | null): unknown {
    const base = { id: this.id, created: this.created, model: this.model, system_fingerprint: null };
    const usage = this.includeUsage ? { usage: null } : {};
    if (this.kind === 'chat') {
      const d = typeof delta === 'string' ? { content: delta } : delta;
      return { ...base, object: 'chat.completion.chunk', choices: [{ index: 0, delta: d, logprobs: null, finish_reason: finishReason }], ...usage };
    }
    return { ...base, object: 'text_completion', choices: [{ index: 0, text: delta, logprobs: null, finish_reason: finishReason }], ...usage };
  }

  usageChunk(ev: Finish): unknown {
    return { id: this.id, created: this.created, model: this.model, object: this.kind === 'chat' ? 'chat.completion.chunk' : 'text_completion', choices: [], usage: usage(ev) };
  }

  whole(text: string, ev: Finish): unknown {
    const base = { id: this.id, created: this.created, model: this.model, system_fingerprint: null, usage: usage(ev) };
    if (this.kind === 'chat') {
      return { ...base, object: 'chat.completion', choices: [{ index: 0, message: { role: 'assistant', content: text }, logprobs: null, finish_reason: ev.reason }] };
    }
    return { ...base, object: 'text_completion', choices: [{ index: 0, text, logprobs: null, finish_reason: ev.reason }] };
  }
}

function usage(ev: Finish): { prompt_tokens: number; completion_tokens: number; total_tokens: number } {
  return { prompt_tokens: ev.promptTokens, completion_tokens: ev.completionTokens, total_tokens: ev.promptTokens + ev.completionTokens };
}
