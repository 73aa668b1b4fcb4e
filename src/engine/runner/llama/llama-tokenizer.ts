// The llama.cpp tokenizer of a loaded model: tokenize, chat template, token pieces and EOG flags,
// all through the addon's context (the same model the runner decodes with). Pieces and EOG flags
// are cached per token id: detokenizing a stream costs one native call per distinct token.
//
// Chat goes through llama.cpp's own chat code (native/src/chat_templates.h): the GGUF's Jinja
// template (or --chat-template's, or ChatML when the GGUF has none), tools, tool_choice and the
// template's variables, rendered exactly as llama-server --jinja renders them. Message text that
// spells a control token is tokenized as text unless `parseSpecialInMessages` is set.
//
// Request prompts are templated and tokenized on libuv's pool by the addon's linear tokenizer
// (encodeText/encodeChat) in two lanes: prompts of up to SMALL_PROMPT_BYTES, and the rest, each
// lane at most one at a time, so a small request never waits behind a large one's tokenization
// (and a decode always finds a pool thread). `settled()` waits for both.

import { ByteDetokenizer } from '../byte-detokenizer.ts';
import type { ChatFormat, ChatMessage, ChatOutputDelta, ChatOutputParser, ChatRequest, EncodeResult, IncrementalDetokenizer, ParsedChatOutput, Tokenizer } from '../../tokenizer.ts';
import { templateBytesPerMessage } from '../template-probe.ts';
import type { AddonChatInfo, AddonContext, LlamaAddon } from './addon.ts';
import { Gate } from './gate.ts';
import { bug } from '../../../util/bug.ts';

/** Prompts up to this many bytes (UTF-16 length as a cheap proxy) take the small lane. */
const SMALL_PROMPT_BYTES = 64 * 1024;

export interface LlamaTokenizerOptions {
  /** A Jinja chat template to use instead of the GGUF's. */
  readonly chatTemplate?: string;
  /** Parse control-token text inside messages as control tokens (llama-server's and vLLM's behaviour); default false. */
  readonly parseSpecialInMessages?: boolean;
  /** Tokenize /v1/completions prompts with special tokens as text (default false: parsed, as the peers do). */
  readonly promptSpecialAsText?: boolean;
}

export class LlamaTokenizer implements Tokenizer {
  readonly vocabSize: number;
  readonly maxTokenBytes: number;
  readonly templateBytesPerMessage: number;
  /** Where the chat template came from: 'gguf', 'override' or 'chatml (none in GGUF)'. */
  readonly chatTemplateSource: string;
  readonly chatInfo: AddonChatInfo;
  readonly parseSpecialInMessages: boolean;
  readonly promptSpecialAsText: boolean;
  readonly #ctx: AddonContext;
  readonly #addon: LlamaAddon;
  readonly #pieces = new Map<number, Uint8Array>();
  readonly #texts = new Map<number, Uint8Array>();
  readonly #eog = new Map<number, boolean>();
  readonly #small = new Gate(1);
  readonly #large = new Gate(1);

  constructor(addon: LlamaAddon, ctx: AddonContext, vocabSize: number, maxTokenBytes: number, opts: LlamaTokenizerOptions = {}) {
    this.#addon = addon;
    this.#ctx = ctx;
    this.vocabSize = vocabSize;
    this.maxTokenBytes = maxTokenBytes;
    this.parseSpecialInMessages = opts.parseSpecialInMessages === true;
    this.promptSpecialAsText = opts.promptSpecialAsText === true;
    this.chatInfo = JSON.parse(ctx.chatInit(opts.chatTemplate ?? '')) as AddonChatInfo;
    this.chatTemplateSource = this.chatInfo.source;
    this.templateBytesPerMessage = templateBytesPerMessage((m) => this.applyChatTemplate(m));
  }

  /** Resolves when no tokenization is in flight (before the context is closed). */
  async settled(): Promise<void> {
    await Promise.all([this.#small.settled(), this.#large.settled()]);
  }

  tokenize(text: string, addBos: boolean): number[] {
    return Array.from(this.#ctx.tokenize(text, addBos, true));
  }

  async encodeText(text: string, addBos: boolean): Promise<number[]> {
    const r = await this.#lane(text.length).run(() => this.#ctx.tokenizeAsync(text, addBos, this.promptSpecialAsText));
    if (r.status !== 0) bug(`tokenizeAsync resolved with status ${r.status}`);
    return Array.from(r.tokens);
  }

  async encodeChat(chat: ChatRequest): Promise<EncodeResult> {
    const json = JSON.stringify(requestJson(chat));
    const r = await this.#lane(json.length).run(() => this.#ctx.chatTokenizeAsync(json, !this.parseSpecialInMessages));
    if (r.status === 1) return { ok: false, reason: 'invalid_request', message: r.error ?? 'the chat request was refused' };
    if (r.status === 2) return { ok: false, reason: 'template_error', message: r.error ?? 'the chat template failed' };
    if (r.status !== 0 || r.params === undefined) bug(`chatTokenizeAsync resolved with status ${r.status}`);
    return { ok: true, tokens: Array.from(r.tokens), format: chatFormat(r.params) };
  }

  openChatParser(format: ChatFormat): ChatOutputParser {
    const native = new this.#addon.ChatParser(format.parserParams);
    return {
      update(textAdded: string, final: boolean): ParsedChatOutput {
        return parsedOutput(native.update(textAdded, !final));
      },
    };
  }

  detokenizer(asText?: readonly number[]): IncrementalDetokenizer {
    if (asText === undefined || asText.length === 0) return new ByteDetokenizer((t) => this.#piece(t));
    const set = new Set(asText);
    return new ByteDetokenizer((t) => (set.has(t) ? this.#text(t) : this.#piece(t)));
  }

  tokenBytes(token: number): Uint8Array {
    return this.#piece(token);
  }

  /** llama.cpp parses the grammar against this vocabulary (on the calling thread; grammars are small). */
  readonly checkGrammar = (gbnf: string): boolean => this.#ctx.checkGrammar(gbnf);

  applyChatTemplate(messages: readonly ChatMessage[]): string {
    return this.#ctx.chatRender(JSON.stringify(requestJson({ messages })), !this.parseSpecialInMessages).prompt;
  }

  isEog(token: number): boolean {
    let v = this.#eog.get(token);
    if (v === undefined) {
      v = this.#ctx.isEog(token);
      this.#eog.set(token, v);
    }
    return v;
  }

  #lane(size: number): Gate {
    return size <= SMALL_PROMPT_BYTES ? this.#small : this.#large;
  }

  #piece(token: number): Uint8Array {
    let p = this.#pieces.get(token);
    if (p === undefined) {
      p = new Uint8Array(this.#ctx.tokenPiece(token));
      this.#pieces.set(token, p);
    }
    return p;
  }

  /** A token's text with control tokens spelled out (the output parser must see the format's markup). */
  #text(token: number): Uint8Array {
    let p = this.#texts.get(token);
    if (p === undefined) {
      p = new Uint8Array(this.#ctx.tokenPiece(token, true));
      this.#texts.set(token, p);
    }
    return p;
  }
}

/** The request in OpenAI's shapes, as llama.cpp's chat code reads it. */
export function requestJson(chat: ChatRequest): Record<string, unknown> {
  const out: Record<string, unknown> = { messages: chat.messages.map(messageJson) };
  if (chat.tools !== undefined && chat.tools.length > 0) {
    out['tools'] = chat.tools.map((t) => ({
      type: 'function',
      function: { name: t.name, ...(t.description === undefined ? {} : { description: t.description }), parameters: t.parameters ?? { type: 'object', properties: {} } },
    }));
  }
  if (chat.toolChoice !== undefined) out['tool_choice'] = chat.toolChoice;
  if (chat.parallelToolCalls !== undefined) out['parallel_tool_calls'] = chat.parallelToolCalls;
  if (chat.templateKwargs !== undefined) out['chat_template_kwargs'] = chat.templateKwargs;
  if (chat.reasoningEffort !== undefined) out['reasoning_effort'] = chat.reasoningEffort;
  return out;
}

function messageJson(m: ChatMessage): Record<string, unknown> {
  const out: Record<string, unknown> = { role: m.role, content: m.content };
  if (m.toolCalls !== undefined && m.toolCalls.length > 0) {
    out['tool_calls'] = m.toolCalls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } }));
  }
  if (m.toolCallId !== undefined) out['tool_call_id'] = m.toolCallId;
  if (m.name !== undefined) out['name'] = m.name;
  if (m.reasoningContent !== undefined) out['reasoning_content'] = m.reasoningContent;
  return out;
}

interface NativeParams {
  format: string;
  grammar: string;
  grammarLazy: boolean;
  triggerPatterns: string[];
  triggerTokens: number[];
  grammarPrefill: number[];
  preservedTokens: number[];
  additionalStops: string[];
  parseToolCalls: boolean;
  supportsThinking: boolean;
}

function chatFormat(params: string): ChatFormat {
  const p = JSON.parse(params) as NativeParams;
  return {
    name: p.format,
    ...(p.grammar === '' ? {} : { grammar: p.grammar }),
    ...(p.grammar !== '' && p.grammarLazy ? { grammarLazy: { patterns: p.triggerPatterns, tokens: p.triggerTokens } } : {}),
    ...(p.grammar !== '' && p.grammarPrefill.length > 0 ? { grammarPrefill: p.grammarPrefill } : {}),
    additionalStops: p.additionalStops,
    preservedTokens: p.preservedTokens,
    parseToolCalls: p.parseToolCalls,
    reasoning: p.supportsThinking,
    parserParams: params,
  };
}

interface NativeParsed {
  diffs: { content?: string; reasoning?: string; toolIndex?: number; id?: string; name?: string; arguments?: string }[];
  message?: { content?: string | null; reasoning_content?: string; tool_calls?: { id: string; function: { name: string; arguments: string } }[] };
  error?: string;
}

function parsedOutput(json: string): ParsedChatOutput {
  const r = JSON.parse(json) as NativeParsed;
  const deltas: ChatOutputDelta[] = [];
  for (const d of r.diffs ?? []) {
    if (d.reasoning !== undefined) deltas.push({ kind: 'reasoning', text: d.reasoning });
    if (d.content !== undefined) deltas.push({ kind: 'content', text: d.content });
    if (d.toolIndex !== undefined) {
      deltas.push({ kind: 'tool_call', index: d.toolIndex, ...(d.id === undefined ? {} : { id: d.id }), ...(d.name === undefined ? {} : { name: d.name }), arguments: d.arguments ?? '' });
    }
  }
  const m = r.message;
  return {
    content: m?.content ?? '',
    ...(m?.reasoning_content === undefined || m.reasoning_content === '' ? {} : { reasoningContent: m.reasoning_content }),
    toolCalls: (m?.tool_calls ?? []).map((c) => ({ id: c.id, name: c.function.name, arguments: c.function.arguments })),
    deltas,
    ...(r.error === undefined ? {} : { error: r.error }),
  };
}
