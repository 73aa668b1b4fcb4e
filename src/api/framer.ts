// OpenAI response shapes for one request: streamed chunks (one choice per chunk, with its index),
// the usage chunk, and the whole JSON response. Field order and nulls follow OpenAI's responses,
// which clients parse strictly.

import type { Kind } from './prepare.ts';

export interface Usage {
  readonly prompt_tokens: number;
  readonly completion_tokens: number;
  readonly total_tokens: number;
}

export interface FinishedChoice {
  readonly text: string;
  readonly finishReason: string;
}

export function usage(numPromptTokens: number, numCompletionTokens: number): Usage {
  return { prompt_tokens: numPromptTokens, completion_tokens: numCompletionTokens, total_tokens: numPromptTokens + numCompletionTokens };
}

export class Framer {
  constructor(
    readonly kind: Kind,
    readonly id: string,
    readonly created: number,
    readonly model: string,
    readonly includeUsage: boolean,
  ) {}

  chunk(index: number, delta: string | { role?: string; content?: string }, finishReason: string | null): unknown {
    const base = { id: this.id, created: this.created, model: this.model, system_fingerprint: null };
    const u = this.includeUsage ? { usage: null } : {};
    if (this.kind === 'chat') {
      const d = typeof delta === 'string' ? { content: delta } : delta;
      return { ...base, object: 'chat.completion.chunk', choices: [{ index, delta: d, logprobs: null, finish_reason: finishReason }], ...u };
    }
    return { ...base, object: 'text_completion', choices: [{ index, text: delta, logprobs: null, finish_reason: finishReason }], ...u };
  }

  usageChunk(u: Usage): unknown {
    return { id: this.id, created: this.created, model: this.model, object: this.kind === 'chat' ? 'chat.completion.chunk' : 'text_completion', choices: [], usage: u };
  }

  whole(choices: readonly FinishedChoice[], u: Usage): unknown {
    const base = { id: this.id, created: this.created, model: this.model, system_fingerprint: null, usage: u };
    if (this.kind === 'chat') {
      return { ...base, object: 'chat.completion', choices: choices.map((c, index) => ({ index, message: { role: 'assistant', content: c.text }, logprobs: null, finish_reason: c.finishReason })) };
    }
    return { ...base, object: 'text_completion', choices: choices.map((c, index) => ({ index, text: c.text, logprobs: null, finish_reason: c.finishReason })) };
  }
}
