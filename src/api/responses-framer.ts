// The Responses API's framing of one generation (one output message, one output_text part).
//
// Not streamed: a `response` object, status `completed`, or `incomplete` with
// incomplete_details.reason `max_output_tokens` when the token limit ended it.
// Streamed: named SSE events, each with a `sequence_number` counting from 0, no [DONE]:
//
//   response.created → response.in_progress → response.output_item.added → response.content_part.added
//   → response.output_text.delta … → response.output_text.done → response.content_part.done
//   → response.output_item.done → response.completed (or response.incomplete)
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

  /** Content only: tools are not served on this surface, and reasoning is not framed here. */
  deltas(index: number, deltas: readonly ChatOutputDelta[]): SseFrame[] {
    return deltas.flatMap((d) => (d.kind === 'content' ? this.text(index, d.text) : []));
  }

  end(_index: number, finishReason: string): SseFrame[] {
    this.#status = statusOf(finishReason);
    const at = { item_id: this.#itemId, output_index: 0, content_index: 0 };
    return [
      this.#event('response.output_text.done', { ...at, text: this.#text, logprobs: [] }),
      this.#event('response.content_part.done', { ...at, part: part(this.#text) }),
      this.#event('response.output_item.done', { output_index: 0, item: this.#message(this.#status, [part(this.#text)]) }),
    ];
  }

  closing(u: Usage): SseFrame[] {
    const response = this.#response(this.#status, [this.#message(this.#status, [part(this.#text)])], u);
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
    return this.#response(status, [this.#message(status, [part(c.text)])], u);
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
      parallel_tool_calls: false,
      previous_response_id: null,
      reasoning: { effort: null, summary: null },
      service_tier: 'default',
      store: false,
      temperature: e.temperature,
      text: { format: { type: 'text' }, verbosity: 'medium' },
      tool_choice: 'none',
      tools: [],
      top_logprobs: 0,
      top_p: e.topP,
      truncation: 'disabled',
      usage: u === null ? null : responseUsage(u),
      user: null,
      metadata: e.metadata,
    };
  }
}

/** `length` (the token limit) leaves a Response incomplete; a stop (EOS or a stop string) completes it. */
function statusOf(finishReason: string): Status {
  return finishReason === 'length' ? 'incomplete' : 'completed';
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
