// Gateway mode's request validation: the envelope, not the contents. The gateway checks what it
// acts on itself, and leaves the rest to the upstream, whose 4xx it passes through unchanged:
//
//   checked here  a JSON object; `model` a string naming a model some upstream serves (else 404
//                 model_not_found, as in engine mode); `messages` (chat), `prompt` (completions) or
//                 `input` (responses) present; `stream` a boolean; `max_tokens` /
//                 `max_completion_tokens` / `max_output_tokens` and `n` positive integers (flow
//                 control's token caps count them)
//   not checked   sampling fields, tools, response formats, context length: the upstream knows what
//                 it supports, and a gateway stricter than its engines would refuse what they serve
//
// It also cuts the affinity key the picker matches on: the prompt's bytes (chat: each message's
// role and content; a token-id prompt: the ids, offset past the byte range), at most
// MAX_AFFINITY_BYTES of them (a shared prefix longer than that adds nothing to the choice).

import { ApiError } from './errors.ts';

export type Endpoint = 'chat' | 'completion' | 'responses';

export interface Envelope {
  readonly model: string;
  readonly stream: boolean;
  /** The output cap the request asked for (null: none given). */
  readonly maxTokens: number | null;
  readonly n: number;
  /** Chat messages (1 for a completion or a Responses input). */
  readonly numMessages: number;
  /** UTF-8 bytes of the prompt text, for flow control's token estimate. */
  readonly promptBytes: number;
  readonly affinityKey: number[];
}

export const MAX_AFFINITY_BYTES = 32 * 1024;
/** Token ids of a token-array prompt are keyed past the 256 byte values, so they never match text. */
const TOKEN_KEY_OFFSET = 256;

const PROMPT_FIELD: Readonly<Record<Endpoint, string>> = { chat: 'messages', completion: 'prompt', responses: 'input' };
const MAX_FIELDS: Readonly<Record<Endpoint, readonly string[]>> = { chat: ['max_tokens', 'max_completion_tokens'], completion: ['max_tokens'], responses: ['max_output_tokens'] };
const encoder = new TextEncoder();

export function checkEnvelope(endpoint: Endpoint, raw: unknown, models: readonly string[]): Envelope {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new ApiError('invalid_value', 'The request body must be a JSON object.');
  const body = raw as Record<string, unknown>;
  const model = body['model'];
  if (typeof model !== 'string' || model.length === 0) throw new ApiError(model === undefined ? 'missing_field' : 'invalid_value', "'model' must be a non-empty string.", { param: 'model' });
  if (!models.includes(model)) {
    throw new ApiError('model_not_found', `The model '${model.slice(0, 256)}' does not exist on this server; it serves ${models.map((m) => `'${m}'`).join(', ')}.`, { param: 'model' });
  }
  const field = PROMPT_FIELD[endpoint];
  const prompt = body[field];
  if (prompt == null) throw new ApiError('missing_field', `'${field}' is required.`, { param: field });
  if (endpoint === 'chat' && (!Array.isArray(prompt) || prompt.length === 0)) throw new ApiError('invalid_value', "'messages' must be a non-empty array.", { param: 'messages' });
  const stream = body['stream'];
  if (stream != null && typeof stream !== 'boolean') throw new ApiError('invalid_value', "'stream' must be a boolean.", { param: 'stream' });
  let maxTokens: number | null = null;
  for (const f of MAX_FIELDS[endpoint]) {
    const v = positiveInt(body, f);
    if (v !== null) maxTokens = v;
  }
  const n = positiveInt(body, 'n') ?? 1;
  const { bytes, key } = promptKey(endpoint, prompt);
  const numMessages = endpoint === 'chat' ? (prompt as unknown[]).length : 1;
  return { model, stream: stream === true, maxTokens, n, numMessages, promptBytes: bytes, affinityKey: key };
}

function positiveInt(body: Record<string, unknown>, field: string): number | null {
  const v = body[field];
  if (v == null) return null;
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 1) throw new ApiError('invalid_value', `'${field}' must be a positive integer.`, { param: field });
  return v;
}

/** The prompt's size in bytes and its affinity key. */
function promptKey(endpoint: Endpoint, prompt: unknown): { bytes: number; key: number[] } {
  if (endpoint === 'completion' && Array.isArray(prompt) && prompt.every((t) => typeof t === 'number')) {
    const ids = prompt;
    return { bytes: ids.length * 4, key: ids.slice(0, MAX_AFFINITY_BYTES).map((t) => t + TOKEN_KEY_OFFSET) };
  }
  let text: string;
  if (typeof prompt === 'string') text = prompt;
  else if (endpoint === 'chat' && Array.isArray(prompt)) text = prompt.map((m) => messageKey(m)).join('');
  else text = JSON.stringify(prompt);
  const bytes = encoder.encode(text);
  return { bytes: bytes.length, key: Array.from(bytes.subarray(0, MAX_AFFINITY_BYTES)) };
}

function messageKey(m: unknown): string {
  if (typeof m !== 'object' || m === null) return JSON.stringify(m);
  const { role, content } = m as { role?: unknown; content?: unknown };
  return `${String(role)}\u0000${typeof content === 'string' ? content : JSON.stringify(content)}\u0000`;
}
