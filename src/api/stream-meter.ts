// What the gateway measures on a response it passes through without changing: when output came
// (TTFT, and the gaps between output events, ITL), how it finished, what the upstream billed.
// It reads copies of the bytes; the client gets the originals.
//
// An output event is a data event that carries generated text: a chat delta with content (or tool
// calls, or reasoning), a completion choice with text, a Responses `response.output_text.delta`.
// The opening role-only chunk, finish-only chunks, usage chunks and [DONE] are not output, so TTFT
// is the first text, as in engine mode. Several output events in one read count as that many
// tokens sharing the gap (what the step observer does for a multi-token step). Usage, when the
// upstream sends it, is exact; otherwise output events stand in for completion tokens.

import { dataPayloads } from '../proxy/sse-events.ts';

export interface MeterSink {
  /** The first output, `ms` after arrival. */
  firstToken(ms: number): void;
  /** `count` more output events, each `gapMs` after the one before. */
  tokens(count: number, gapMs: number): void;
}

interface Choice {
  text?: unknown;
  delta?: { content?: unknown; tool_calls?: unknown; reasoning_content?: unknown };
  message?: unknown;
  finish_reason?: unknown;
}
interface Usage {
  prompt_tokens?: unknown;
  completion_tokens?: unknown;
  input_tokens?: unknown;
  output_tokens?: unknown;
}
interface Frame {
  type?: unknown;
  choices?: Choice[];
  usage?: Usage | null;
  response?: { usage?: Usage | null };
  error?: unknown;
}

export class StreamMeter {
  firstTokenMs: number | null = null;
  lastTokenMs: number | null = null;
  numOutputEvents = 0;
  promptTokens: number | null = null;
  completionTokens: number | null = null;
  finishReason: string | null = null;
  sawDone = false;
  /** The upstream sent an error event inside the stream. */
  sawError = false;
  readonly #arrivalMs: number;
  readonly #sink: MeterSink | null;

  constructor(arrivalMs: number, sink: MeterSink | null) {
    this.#arrivalMs = arrivalMs;
    this.#sink = sink;
  }

  /** Whole SSE events that arrived at `nowMs`. */
  events(bytes: Buffer, nowMs: number): void {
    let outputs = 0;
    for (const data of dataPayloads(bytes)) {
      if (data.trim() === '[DONE]') {
        this.sawDone = true;
        continue;
      }
      const f = parse(data);
      if (f === null) continue;
      if (f.error != null) this.sawError = true;
      if (f.type === 'response.output_text.delta') outputs++;
      for (const c of f.choices ?? []) {
        if (isText(c.text) || isText(c.delta?.content) || c.delta?.tool_calls != null || isText(c.delta?.reasoning_content)) outputs++;
        if (typeof c.finish_reason === 'string') this.finishReason = c.finish_reason;
      }
      this.#usage(f.usage ?? f.response?.usage ?? null);
    }
    if (outputs === 0) return;
    this.numOutputEvents += outputs;
    if (this.firstTokenMs === null) {
      this.firstTokenMs = nowMs;
      this.#sink?.firstToken(nowMs - this.#arrivalMs);
      if (outputs > 1) this.#sink?.tokens(outputs - 1, 0);
    } else {
      this.#sink?.tokens(outputs, (nowMs - this.lastTokenMs!) / outputs);
    }
    this.lastTokenMs = nowMs;
  }

  /** A whole (non-streamed) JSON body. */
  whole(bytes: Buffer): void {
    const f = parse(bytes.toString('utf8'));
    if (f === null) return;
    for (const c of f.choices ?? []) if (typeof c.finish_reason === 'string') this.finishReason = c.finish_reason;
    this.#usage(f.usage ?? null);
  }

  /** Completion tokens: the upstream's count when it gave one, else the output events seen. */
  get numOutputTokens(): number {
    return this.completionTokens ?? this.numOutputEvents;
  }

  #usage(u: Usage | null): void {
    if (u === null) return;
    const p = u.prompt_tokens ?? u.input_tokens;
    const c = u.completion_tokens ?? u.output_tokens;
    if (typeof p === 'number') this.promptTokens = p;
    if (typeof c === 'number') this.completionTokens = c;
  }
}

function isText(v: unknown): boolean {
  return typeof v === 'string' && v.length > 0;
}

function parse(text: string): Frame | null {
  try {
    const v = JSON.parse(text) as unknown;
    return typeof v === 'object' && v !== null ? (v) : null;
  } catch {
    return null;
  }
}
