// Parse and prepare: an HTTP body becomes a validated, tokenized job description, or a 400 that
// names the offending field. Nothing here reaches the backend's engine; only its tokenizer.
//
//   parse   — the message count read before the schema (a 30,000-message body must not cost a full
//             validation), fields we do not implement (unsupported.ts), the body's shape (zod), the
//             model name, the values we support
//   prepare — size checks that cannot refuse a prompt that fits (limits.ts), then tokenize off the
//             event loop (chat template or raw prompt), then the exact checks against the context
//             and the server's output cap, the budget headers, sampling defaults

import type { ServerConfig } from './config.ts';
import { ApiError } from './errors.ts';
import type { IdSource } from './ids.ts';
import type { SizeFacts } from './limits.ts';
import { samplingParams } from './sampling.ts';
import { checkMessageCount, checkMessagesSize, checkPromptSize, sloFromHeader } from './limits.ts';
import type { ChatCompletionBody, CompletionBody } from './schemas.ts';
import { chatCompletionBody, checkSupported, completionBody, parseBody } from './schemas.ts';
import { chatRequest } from './chat-request.ts';
import { refuseUnsupported } from './unsupported.ts';
import type { BackendInfo } from '../backend/backend.ts';
import type { SamplingParams } from '../engine/plan.ts';
import type { ChatFormat, Tokenizer } from '../engine/tokenizer.ts';

export type Kind = 'chat' | 'completion';

export type Parsed = { readonly kind: 'chat'; readonly body: ChatCompletionBody } | { readonly kind: 'completion'; readonly body: CompletionBody };

export interface Prepared {
  readonly kind: Kind;
  readonly model: string;
  readonly promptTokens: readonly number[];
  /** Chat messages (1 for a completion). */
  readonly numMessages: number;
  /** Per choice. */
  readonly maxTokens: number;
  readonly n: number;
  readonly stop: readonly string[];
  readonly sampling: SamplingParams;
  readonly ignoreEos: boolean;
  /** E2E budget: `x-slo-ms`, or TTFT + max_tokens × TPOT when those headers are given (the smaller), or the server default. */
  readonly sloMs: number;
  /** TTFT budget (`x-slo-ttft-ms`), or null. */
  readonly ttftBudgetMs: number | null;
  /** TPOT budget (`x-slo-tpot-ms`), or null: while the request decodes, the engine keeps its steps within it. */
  readonly tpotBudgetMs: number | null;
  readonly stream: boolean;
  readonly includeUsage: boolean;
  /**
   * Chat: what the model's chat format asks of sampling and parsing (tool calls, reasoning); null
   * for completions and for output that needs no parsing.
   */
  readonly chatFormat: ChatFormat | null;
}

/** `models`: the names the server answers to (--served-model-name, else the model's own id). */
export function parse(kind: Kind, raw: unknown, models: readonly string[], size: SizeFacts): Parsed {
  if (kind === 'chat') checkMessageCount(size, raw);
  refuseUnsupported(kind, raw);
  if (kind === 'chat') refuseNonTextParts(raw);
  const parsed: Parsed = kind === 'chat' ? { kind, body: parseBody(chatCompletionBody, raw) } : { kind, body: parseBody(completionBody, raw) };
  checkModel(parsed.body.model, models);
  checkSupported(parsed.body);
  return parsed;
}

/** A content part other than text (an image, audio, a file) is refused by name, not by the schema's generic message. */
function refuseNonTextParts(raw: unknown): void {
  const messages = typeof raw === 'object' && raw !== null ? (raw as { messages?: unknown }).messages : undefined;
  if (!Array.isArray(messages)) return;
  for (const [i, m] of messages.entries()) {
    const content = typeof m === 'object' && m !== null ? (m as { content?: unknown }).content : undefined;
    if (!Array.isArray(content)) continue;
    for (const [j, part] of content.entries()) {
      const type = typeof part === 'object' && part !== null ? (part as { type?: unknown }).type : undefined;
      if (typeof type === 'string' && type !== 'text') {
        throw new ApiError('unsupported_value', `Content of type ${JSON.stringify(type).slice(0, 40)} is not served: this server's model reads text only (parts of type "text").`, { param: `messages.${i}.content.${j}` });
      }
    }
  }
}

/** The model a request names must be one the server answers to (`models`: --served-model-name, else the model's own id). */
export function checkModel(model: string, models: readonly string[]): void {
  if (!models.includes(model)) {
    throw new ApiError('model_not_found', `The model '${model.slice(0, 256)}' does not exist on this server; it serves ${models.map((m) => `'${m}'`).join(', ')}.`, { param: 'model' });
  }
}

export interface PrepareDeps {
  readonly tokenizer: Tokenizer;
  readonly info: BackendInfo;
  readonly size: SizeFacts;
  readonly config: ServerConfig;
  readonly ids: IdSource;
}

/** The latency-budget headers of a request (llm-d's names for the TTFT and TPOT ones). */
export interface BudgetHeaders {
  readonly slo: string | string[] | undefined;
  readonly ttft: string | string[] | undefined;
  readonly tpot: string | string[] | undefined;
}

export async function prepare(p: Parsed, budget: BudgetHeaders, deps: PrepareDeps): Promise<Prepared> {
  const { body } = p;
  // The budget first: a refusal costs no tokenizing.
  const sloHeaderMs = budget.slo === undefined ? null : sloFromHeader(budget.slo, deps.config);
  const ttftBudgetMs = headerMs(budget.ttft, 'x-slo-ttft-ms', deps.config);
  const tpotMs = headerMs(budget.tpot, 'x-slo-tpot-ms', deps.config);
  // Sampling fields too (a response_format becomes a checked grammar here): a 400 costs no tokenizing.
  const sampling = samplingParams(p, deps.tokenizer, body.seed ?? deps.ids.seed());
  const requested = body.max_completion_tokens ?? body.max_tokens ?? null;
  const { tokens: promptTokens, format } = await tokenizePrompt(p, deps, requested);
  const ctx = deps.info.contextTokens;
  if (promptTokens.length >= ctx) {
    throw new ApiError('context_length_exceeded', `This model's maximum context length is ${ctx} tokens; the prompt has ${promptTokens.length}.`, { param: p.kind === 'chat' ? 'messages' : 'prompt' });
  }
  if (requested !== null && promptTokens.length + requested > ctx) {
    throw new ApiError('context_length_exceeded', `This model's maximum context length is ${ctx} tokens; you requested ${promptTokens.length + requested} (${promptTokens.length} in the prompt, ${requested} for the completion).`, { param: body.max_completion_tokens != null ? 'max_completion_tokens' : 'max_tokens' });
  }
  if (requested !== null && requested > deps.config.maxOutputTokens) {
    throw new ApiError('invalid_value', `max_tokens is at most ${deps.config.maxOutputTokens} on this server; got ${requested}.`, { param: 'max_tokens' });
  }
  const stream = body.stream === true;
  const maxTokens = requested ?? Math.min(deps.config.maxOutputTokens, ctx - promptTokens.length);
  const fromTpot = tpotMs === null ? null : (ttftBudgetMs ?? 0) + maxTokens * tpotMs;
  const sloMs = sloHeaderMs !== null && fromTpot !== null ? Math.min(sloHeaderMs, fromTpot) : (sloHeaderMs ?? fromTpot ?? deps.config.sloMs);
  return {
    kind: p.kind,
    model: body.model,
    promptTokens,
    numMessages: p.kind === 'chat' ? p.body.messages.length : 1,
    maxTokens,
    n: body.n ?? 1,
    stop: [...(body.stop == null ? [] : typeof body.stop === 'string' ? [body.stop] : body.stop), ...(format?.additionalStops ?? [])],
    sampling: format?.grammar === undefined ? sampling : { ...sampling, grammar: format.grammar, ...(format.grammarLazy === undefined ? {} : { grammarLazy: format.grammarLazy }), ...(format.grammarPrefill === undefined ? {} : { grammarPrefill: format.grammarPrefill }) },
    ignoreEos: body.ignore_eos === true,
    sloMs,
    ttftBudgetMs,
    tpotBudgetMs: tpotMs,
    stream,
    includeUsage: stream && body.stream_options?.include_usage === true,
    chatFormat: format !== null && (format.parseToolCalls || format.reasoning) ? format : null,
  };
}

async function tokenizePrompt(p: Parsed, deps: PrepareDeps, requested: number | null): Promise<{ tokens: number[]; format: ChatFormat | null }> {
  const tokenizer = deps.tokenizer;
  if (p.kind === 'chat') {
    const chat = chatRequest(p.body, tokenizer);
    checkMessagesSize(deps.size, chat.messages, requested);
    const encoded = await tokenizer.encodeChat(chat);
    if (!encoded.ok) throw encodeError(encoded);
    return { tokens: encoded.tokens, format: encoded.format ?? null };
  }
  const prompt = p.body.prompt;
  if (typeof prompt === 'string' || typeof prompt[0] === 'string') {
    const text = typeof prompt === 'string' ? prompt : (prompt[0] as string);
    if (text.length === 0) throw new ApiError('invalid_value', 'The prompt must not be empty.', { param: 'prompt' });
    checkPromptSize(deps.size, text, requested);
    return { tokens: await tokenizer.encodeText(text, true), format: null };
  }
  const ids = prompt as number[];
  const bad = ids.find((t) => t >= tokenizer.vocabSize);
  if (bad !== undefined) throw new ApiError('invalid_value', `Token id ${bad} is outside the vocabulary [0, ${tokenizer.vocabSize}).`, { param: 'prompt' });
  return { tokens: [...ids], format: null };
}

/** A conversation the chat code or the template refused: the client's 400, naming the template. */
export function encodeError(e: { readonly reason: 'invalid_request' | 'template_error'; readonly message: string }): ApiError {
  const what = e.reason === 'template_error' ? "The model's chat template raised an error on these messages" : 'The conversation cannot be rendered';
  return new ApiError('invalid_value', `${what}: ${e.message.slice(0, 500)}`, { param: 'messages' });
}

/** A TTFT or TPOT budget header in whole ms, or null when absent; out of [1, maxSloMs] is a 400 naming the header. */
export function headerMs(h: string | string[] | undefined, name: string, config: ServerConfig): number | null {
  if (h === undefined) return null;
  const v = Array.isArray(h) ? h[0] : h;
  const n = Number(v);
  if (v === undefined || !/^\d+$/.test(v.trim()) || !(n >= 1 && n <= config.maxSloMs)) {
    throw new ApiError('invalid_value', `${name} must be an integer number of milliseconds in [1, ${config.maxSloMs}]; got '${v}'.`, { param: name });
  }
  return n;
}
