// The Responses API's framing of one generation: one output message with one output_text part,
// then a function_call item per tool call the model made.
//
// Not streamed: a `response` object, status `completed`, or `incomplete` with
// incomplete_details.reason `max_output_tokens` when the token limit ended it.
// Streamed: named SSE events, each with a `sequence_number` counting from 0, no [DONE]:
//
//   response.created → response.in_progress → response.output_item.added → response.content_part.added
//   → response.output_text.delta … → response.output_text.done → response.content_part.done
//   → response.output_item.done → response.completed (or response.incomplete)
//
// and per function call, once its name is known: response.output_item.added (a function_call item)
// → response.function_call_arguments.delta … → (at the end) response.function_call_arguments.done
// → response.output_item.done.
//
// A failure mid-stream is an `error` event, and the stream ends. Field order and the fields
// present follow OpenAI's Response object, which the AI SDK and openai-node parse.

import type { ApiError } from './errors.ts';
import type { FinishedChoice, Framing, SseFrame, Usage } from './framer.ts';
import type { ChatOutputDelta } from '../engine/tokenizer.ts';

/** Request fields a Response reports back. */
export interface ResponseEcho {
  readonly instructions: string | null;
  readonly maxOutputTokens: number | null;
  readonly temperature: number;
  readonly topP: number;
  readonly metadata: Readonly<Record<string, string>>;
  readonly tools: readonly unknown[];
  readonly toolChoice: unknown;
  readonly parallelToolCalls: boolean;
  readonly textFormat: unknown;
}

interface FunctionCall {
  id: string;
  callId: string;
  name: string;
  arguments: string;
}

type Status = 'in_progress' | 'completed' | 'incomplete';

export class ResponsesFramer implements Framing {
  readonly endsWithDone = false;
  readonly #id: string;
  readonly #itemId: string;
  readonly #createdS: number;
  readonly #model: string;
  readonly #echo: ResponseEcho;
  #sequence = 0;
  #text = '';
  readonly #calls: FunctionCall[] = [];
  #status: Status = 'in_progress';

  constructor(id: string, createdS: number, model: string, echo: ResponseEcho) {
    this.#id = id;
    this.#itemId = id.replace(/^resp/, 'msg');
    this.#createdS = createdS;
    this.#model = model;
    this.#echo = echo;
  }

  opening(numChoices: number): SseFrame[] {
    if (numChoices !== 1) throw new Error(`bug: a Response has one output message, got ${numChoices} choices`);
    const response = this.#response('in_progress', [], null);
    return [
      this.#event('response.created', { response }),
      this.#event('response.in_progress', { response }),
      this.#event('response.output_item.added', { output_index: 0, item: this.#message('in_progress', []) }),
      this.#event('response.content_part.added', { item_id: this.#itemId, output_index: 0, content_index: 0, part: part('') }),
    ];
  }

  text(_index: number, text: string): SseFrame[] {
    this.#text += text;
    return [this.#event('response.output_text.delta', { item_id: this.#itemId, output_index: 0, content_index: 0, delta: text, logprobs: [] })];
  }

  /** Content and function calls (reasoning is not framed here). */
  deltas(index: number, deltas: readonly ChatOutputDelta[]): SseFrame[] {
    return deltas.flatMap((d) => {
      if (d.kind === 'content') return this.text(index, d.text);
      if (d.kind !== 'tool_call') return [];
      const frames: SseFrame[] = [];
      let call = this.#calls[d.index];
      if (call === undefined) {
        const callId = d.id ?? `call_${d.index}`;
        call = { id: `fc_${callId}`, callId, name: d.name ?? '', arguments: '' };
        this.#calls[d.index] = call;
        frames.push(this.#event('response.output_item.added', { output_index: 1 + d.index, item: functionCall(call, 'in_progress') }));
      }
      if (d.arguments !== '') {
        call.arguments += d.arguments;
        frames.push(this.#event('response.function_call_arguments.delta', { item_id: call.id, output_index: 1 + d.index, delta: d.arguments }));
      }
      return frames;
    });
  }

  end(_index: number, finishReason: string): SseFrame[] {
    this.#status = statusOf(finishReason);
    const at = { item_id: this.#itemId, output_index: 0, content_index: 0 };
    return [
      this.#event('response.output_text.done', { ...at, text: this.#text, logprobs: [] }),
      this.#event('response.content_part.done', { ...at, part: part(this.#text) }),
      this.#event('response.output_item.done', { output_index: 0, item: this.#message(this.#status, [part(this.#text)]) }),
      ...this.#calls.flatMap((c, i) => [
        this.#event('response.function_call_arguments.done', { item_id: c.id, output_index: 1 + i, arguments: c.arguments }),
        this.#event('response.output_item.done', { output_index: 1 + i, item: functionCall(c, 'completed') }),
      ]),
    ];
  }

  closing(u: Usage): SseFrame[] {
    const response = this.#response(this.#status, [this.#message(this.#status, [part(this.#text)]), ...this.#calls.map((c) => functionCall(c, 'completed'))], u);
    return [this.#event(this.#status === 'incomplete' ? 'response.incomplete' : 'response.completed', { response })];
  }

  failure(e: ApiError): SseFrame[] {
    const body = e.toBody().error;
    return [this.#event('error', { code: body.code, message: body.message, param: body.param })];
  }

  whole(choices: readonly FinishedChoice[], u: Usage): unknown {
    const c = choices[0];
    if (c === undefined || choices.length !== 1) throw new Error(`bug: a Response has one output message, got ${choices.length} choices`);
    const status = statusOf(c.finishReason);
    const calls = (c.message?.toolCalls ?? []).map((t) => functionCall({ id: `fc_${t.id}`, callId: t.id, name: t.name, arguments: t.arguments }, 'completed'));
    return this.#response(status, [this.#message(status, [part(c.text)]), ...calls], u);
  }

  #event(type: string, fields: Record<string, unknown>): SseFrame {
    return { event: type, data: { type, ...fields, sequence_number: this.#sequence++ } };
  }

  #message(status: Status, content: unknown[]): unknown {
    return { id: this.#itemId, type: 'message', status, role: 'assistant', content };
  }

  #response(status: Status, output: unknown[], u: Usage | null): unknown {
    const e = this.#echo;
    return {
      id: this.#id,
      object: 'response',
      created_at: this.#createdS,
      status,
      background: false,
      error: null,
      incomplete_details: status === 'incomplete' ? { reason: 'max_output_tokens' } : null,
      instructions: e.instructions,
      max_output_tokens: e.maxOutputTokens,
      max_tool_calls: null,
      model: this.#model,
      output,
      parallel_tool_calls: e.parallelToolCalls,
      previous_response_id: null,
      reasoning: { effort: null, summary: null },
      service_tier: 'default',
      store: false,
      temperature: e.temperature,
      text: { format: e.textFormat, verbosity: 'medium' },
      tool_choice: e.toolChoice,
      tools: e.tools,
      top_logprobs: 0,
      top_p: e.topP,
      truncation: 'disabled',
      usage: u === null ? null : responseUsage(u),
      user: null,
      metadata: e.metadata,
    };
  }
}

/** `length` (the token limit) leaves a Response incomplete; a stop (EOS, a stop string, tool calls) completes it. */
function statusOf(finishReason: string): Status {
  return finishReason === 'length' ? 'incomplete' : 'completed';
}

function functionCall(c: FunctionCall, status: 'in_progress' | 'completed'): unknown {
  return { id: c.id, type: 'function_call', status, arguments: c.arguments, call_id: c.callId, name: c.name };
}

function part(text: string): unknown {
  return { type: 'output_text', text, annotations: [], logprobs: [] };
}

function responseUsage(u: Usage): unknown {
  return {
    input_tokens: u.prompt_tokens,
    input_tokens_details: { cached_tokens: 0 },
    output_tokens: u.completion_tokens,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: u.total_tokens,
  };
}
