// OpenAI response shapes for one request: streamed chunks (one choice per chunk, with its index),
// the usage chunk, and the whole JSON response. Field order and nulls follow OpenAI's responses,
// which clients parse strictly.
//
// `Framing` is what the generation loop (completions.ts) writes through: the frames a stream sends
// at each moment and the whole response. `Framer` frames chat and completions; the Responses API
// has its own (responses-framer.ts) over the same loop.
//
// `logprobs` is null unless the request asked for log-probabilities; then each chunk carries the
// entries of the tokens it covers (logprob-format.ts).

import type { ApiError } from './errors.ts';
import type { Kind } from './prepare.ts';
import type { LogprobEntry } from './logprob-format.ts';
import type { ChatOutputDelta, ParsedChatOutput } from '../engine/tokenizer.ts';
import { chatLogprobs, completionLogprobs, namedLength } from './logprob-format.ts';

export interface Usage {
  readonly prompt_tokens: number;
  readonly completion_tokens: number;
  readonly total_tokens: number;
}

export interface FinishedChoice {
  /** The text generated (with a parsed message, its content). */
  readonly text: string;
  /** Chat output parsed by the model's chat format (tool calls, reasoning), when it asked for parsing. */
  readonly message?: ParsedChatOutput;
  readonly finishReason: string;
  /** Null unless log-probabilities were asked for. */
  readonly logprobs: readonly LogprobEntry[] | null;
}

/** One SSE frame: `event: <event>` when named (the Responses API), then `data: <json>`. */
export interface SseFrame {
  readonly event?: string;
  readonly data: unknown;
}

/** How one API surface frames a generation. Streams call opening, then text/end per choice, then closing (unless aborted). */
export interface Framing {
  /** The stream ends with `data: [DONE]` (chat, completions), or just ends (Responses). */
  readonly endsWithDone: boolean;
  /** Frames before any text. */
  opening(numChoices: number): SseFrame[];
  /** Text a choice gained; `logprobs` its tokens' entries when the request asked for them (surfaces that refuse logprobs ignore them). */
  text(index: number, text: string, logprobs?: readonly LogprobEntry[] | null): SseFrame[];
  /** What a parsed chat output gained: content, reasoning and tool-call fragments. */
  deltas(index: number, deltas: readonly ChatOutputDelta[]): SseFrame[];
  end(index: number, finishReason: string): SseFrame[];
  /** After every choice ended normally. */
  closing(u: Usage): SseFrame[];
  /** The stream's last frame when it fails. */
  failure(e: ApiError): SseFrame[];
  /** The whole response, not streamed. */
  whole(choices: readonly FinishedChoice[], u: Usage): unknown;
}

export function usage(numPromptTokens: number, numCompletionTokens: number): Usage {
  return { prompt_tokens: numPromptTokens, completion_tokens: numCompletionTokens, total_tokens: numPromptTokens + numCompletionTokens };
}

export class Framer implements Framing {
  readonly endsWithDone = true;
  /** Completions' text_offset: characters named so far, per choice (streamed chunks continue it). */
  readonly #offsets = new Map<number, number>();

  constructor(
    readonly kind: Kind,
    readonly id: string,
    readonly created: number,
    readonly model: string,
    readonly includeUsage: boolean,
  ) {}

  opening(numChoices: number): SseFrame[] {
    if (this.kind !== 'chat') return [];
    return Array.from({ length: numChoices }, (_, i) => ({ data: this.chunk(i, { role: 'assistant', content: '' }, null) }));
  }

  text(index: number, text: string, logprobs: readonly LogprobEntry[] | null = null): SseFrame[] {
    return [{ data: this.chunk(index, text, null, logprobs) }];
  }

  deltas(index: number, deltas: readonly ChatOutputDelta[]): SseFrame[] {
    return deltas.map((d) => ({ data: this.chunk(index, chatDelta(d), null) }));
  }

  end(index: number, finishReason: string): SseFrame[] {
    return [{ data: this.chunk(index, this.kind === 'chat' ? {} : '', finishReason) }];
  }

  closing(u: Usage): SseFrame[] {
    return this.includeUsage ? [{ data: this.usageChunk(u) }] : [];
  }

  failure(e: ApiError): SseFrame[] {
    return [{ data: e.toBody() }];
  }

  chunk(index: number, delta: string | Record<string, unknown>, finishReason: string | null, logprobs: readonly LogprobEntry[] | null = null): unknown {
    const base = { id: this.id, created: this.created, model: this.model, system_fingerprint: null };
    const u = this.includeUsage ? { usage: null } : {};
    if (this.kind === 'chat') {
      const d = typeof delta === 'string' ? { content: delta } : delta;
      return { ...base, object: 'chat.completion.chunk', choices: [{ index, delta: d, logprobs: this.#logprobs(index, logprobs), finish_reason: finishReason }], ...u };
    }
    return { ...base, object: 'text_completion', choices: [{ index, text: delta, logprobs: this.#logprobs(index, logprobs), finish_reason: finishReason }], ...u };
  }

  #logprobs(index: number, entries: readonly LogprobEntry[] | null): unknown {
    if (entries === null) return null;
    if (this.kind === 'chat') return chatLogprobs(entries);
    const offset = this.#offsets.get(index) ?? 0;
    this.#offsets.set(index, offset + namedLength(entries));
    return completionLogprobs(entries, offset);
  }

  usageChunk(u: Usage): unknown {
    return { id: this.id, created: this.created, model: this.model, object: this.kind === 'chat' ? 'chat.completion.chunk' : 'text_completion', choices: [], usage: u };
  }

  whole(choices: readonly FinishedChoice[], u: Usage): unknown {
    const base = { id: this.id, created: this.created, model: this.model, system_fingerprint: null, usage: u };
    if (this.kind === 'chat') {
      return { ...base, object: 'chat.completion', choices: choices.map((c, index) => ({ index, message: c.message === undefined ? { role: 'assistant', content: c.text } : chatMessage(c.message), logprobs: this.#logprobs(index, c.logprobs), finish_reason: c.finishReason })) };
    }
    return { ...base, object: 'text_completion', choices: choices.map((c, index) => ({ index, text: c.text, logprobs: this.#logprobs(index, c.logprobs), finish_reason: c.finishReason })) };
  }
}

/** One parsed-output delta as a chat chunk's `delta` (OpenAI's shape; reasoning as vLLM and llama-server send it). */
function chatDelta(d: ChatOutputDelta): Record<string, unknown> {
  if (d.kind === 'content') return { content: d.text };
  if (d.kind === 'reasoning') return { reasoning_content: d.text };
  const fn = { ...(d.name === undefined ? {} : { name: d.name }), arguments: d.arguments };
  return { tool_calls: [{ index: d.index, ...(d.id === undefined ? {} : { id: d.id, type: 'function' }), function: fn }] };
}

/** A parsed output as a chat completion's `message`: content null when it only calls tools. */
function chatMessage(m: ParsedChatOutput): Record<string, unknown> {
  const calls = m.toolCalls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } }));
  return {
    role: 'assistant',
    content: calls.length > 0 && m.content === '' ? null : m.content,
    ...(m.reasoningContent === undefined ? {} : { reasoning_content: m.reasoningContent }),
    ...(calls.length > 0 ? { tool_calls: calls } : {}),
  };
}
