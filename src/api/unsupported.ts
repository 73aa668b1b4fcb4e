// Every OpenAI request field this server knows of is implemented, refused or deliberately ignored;
// none is silently dropped. This file holds the two lists that are not implementations:
//
//   REFUSED — fields that would change the output (or promise something, like storage) that this
//             server does not do. A non-default value is a 400 `unsupported_value` naming the field.
//             null, absence and the value that asks for nothing (`tools: []`, `logprobs: false`,
//             `presence_penalty: 0`) are accepted: client libraries send defaults.
//   IGNORED — fields accepted with any value because they cannot change what is generated here
//             (`user`, safety identifiers, cache hints). Listed so docs/api.md and
//             its test can say so.
//
// Fields in neither list and not in the schemas (schemas.ts) are unknown: ignored, as vLLM does,
// so that clients sending vendor extensions keep working (docs/api.md says so).
//
// The check reads the raw body, before zod strips unknown keys; it runs in microseconds (one
// property read per entry) and never throws on a malformed body (parseBody reports that).

import { ApiError } from './errors.ts';

export type Endpoint = 'chat' | 'completion' | 'responses';

export interface RefusedField {
  /** Top-level request field (a dotted path for a nested one, like `text.format`). */
  readonly field: string;
  readonly endpoints: readonly Endpoint[];
  /** True for the values that ask for nothing; null and absence are always accepted. */
  readonly accepts: (value: unknown, body: Readonly<Record<string, unknown>>) => boolean;
  /** The accepted values in words, for the error message and the docs. */
  readonly accepted: string;
}

export interface IgnoredField {
  readonly field: string;
  readonly endpoints: readonly Endpoint[];
  /** Why it cannot change the output. */
  readonly why: string;
}

const CHAT: readonly Endpoint[] = ['chat'];
const CMPL: readonly Endpoint[] = ['completion'];
const RESP: readonly Endpoint[] = ['responses'];
const CHAT_CMPL: readonly Endpoint[] = ['chat', 'completion'];
const CHAT_RESP: readonly Endpoint[] = ['chat', 'responses'];
const ALL: readonly Endpoint[] = ['chat', 'completion', 'responses'];

const never = (): boolean => false;
const is = (...values: readonly unknown[]) => (v: unknown): boolean => values.includes(v);
const empty = (v: unknown): boolean => (Array.isArray(v) ? v.length === 0 : typeof v === 'object' && v !== null && Object.keys(v).length === 0);
/** Every value of an object null (`reasoning: {effort: null, summary: null}`), or an empty object. */
const allNull = (v: unknown): boolean => typeof v === 'object' && v !== null && !Array.isArray(v) && Object.values(v).every((x) => x == null);

/** Sampling outputs served on chat completions and completions but not yet framed by the Responses surface. */
const REFUSED_ON_RESPONSES: readonly RefusedField[] = [
  // Log-probabilities and structured output are served on chat completions and completions
  // (docs/sampling.md); the Responses surface does not frame them yet.
  { field: 'logprobs', endpoints: RESP, accepts: is(false), accepted: 'false' },
  { field: 'top_logprobs', endpoints: RESP, accepts: is(0), accepted: '0' },
];

/** Fields this server does not implement: a non-default value is refused. */
export const REFUSED: readonly RefusedField[] = [
  // Tools are served on chat completions (`tools`, `tool_choice`); completions have no messages
  // to carry them, and the deprecated `functions` form is not served.
  { field: 'tools', endpoints: CMPL, accepts: empty, accepted: '[] (tools are served on /v1/chat/completions and /v1/responses)' },
  { field: 'tool_choice', endpoints: CMPL, accepts: is('none', 'auto'), accepted: '"none" or "auto" (with no tools, both mean none)' },
  { field: 'max_tool_calls', endpoints: RESP, accepts: never, accepted: 'null (no cap on function calls beyond parallel_tool_calls)' },
  { field: 'functions', endpoints: CHAT, accepts: empty, accepted: '[] (send tools instead)' },
  { field: 'function_call', endpoints: CHAT, accepts: is('none', 'auto'), accepted: '"none" or "auto" (send tool_choice instead)' },
  // Other modalities and output shapes.
  { field: 'audio', endpoints: CHAT, accepts: never, accepted: 'null' },
  { field: 'modalities', endpoints: CHAT, accepts: (v) => Array.isArray(v) && v.length === 1 && v[0] === 'text', accepted: '["text"]' },
  { field: 'prediction', endpoints: CHAT, accepts: never, accepted: 'null' },
  { field: 'web_search_options', endpoints: CHAT, accepts: never, accepted: 'null' },
  { field: 'verbosity', endpoints: CHAT, accepts: is('medium'), accepted: '"medium"' },
  { field: 'reasoning', endpoints: RESP, accepts: allNull, accepted: 'null or an object of nulls' },
  { field: 'text.verbosity', endpoints: RESP, accepts: is('medium'), accepted: '"medium"' },
  // Storage and server-side state: nothing is stored, so nothing can be retrieved or continued.
  { field: 'store', endpoints: CHAT_RESP, accepts: is(false), accepted: 'false (nothing is stored)' },
  { field: 'metadata', endpoints: CHAT, accepts: empty, accepted: '{} (it only labels stored completions)' },
  { field: 'previous_response_id', endpoints: RESP, accepts: never, accepted: 'null (responses are not stored)' },
  { field: 'conversation', endpoints: RESP, accepts: never, accepted: 'null (conversations are not stored)' },
  { field: 'prompt', endpoints: RESP, accepts: never, accepted: 'null (no stored prompt templates)' },
  { field: 'background', endpoints: RESP, accepts: is(false), accepted: 'false' },
  { field: 'include', endpoints: RESP, accepts: empty, accepted: '[]' },
  { field: 'truncation', endpoints: RESP, accepts: is('disabled'), accepted: '"disabled" (a prompt over the context is a 400)' },
  // Scheduling tiers: admission control decides, per request, from its latency budget.
  { field: 'service_tier', endpoints: ALL, accepts: is('auto', 'default'), accepted: '"auto" or "default" (use x-slo-ms for a latency budget)' },
  // Legacy completions.
  { field: 'suffix', endpoints: CMPL, accepts: is(''), accepted: '""' },
  { field: 'best_of', endpoints: CMPL, accepts: (v, body) => v === (body.n ?? 1), accepted: 'equal to n (default 1)' },
  { field: 'echo', endpoints: CMPL, accepts: is(false), accepted: 'false' },
  // vLLM extensions that change the output.
  { field: 'min_tokens', endpoints: CHAT_CMPL, accepts: is(0), accepted: '0' },
  { field: 'stop_token_ids', endpoints: CHAT_CMPL, accepts: empty, accepted: '[]' },
  { field: 'include_stop_str_in_output', endpoints: CHAT_CMPL, accepts: is(false), accepted: 'false' },
  { field: 'skip_special_tokens', endpoints: CHAT_CMPL, accepts: is(true), accepted: 'true' },
  { field: 'use_beam_search', endpoints: CHAT_CMPL, accepts: is(false), accepted: 'false' },
  { field: 'guided_json', endpoints: CHAT_CMPL, accepts: never, accepted: 'null' },
  { field: 'guided_regex', endpoints: CHAT_CMPL, accepts: never, accepted: 'null' },
  { field: 'guided_choice', endpoints: CHAT_CMPL, accepts: never, accepted: 'null' },
  { field: 'guided_grammar', endpoints: CHAT_CMPL, accepts: never, accepted: 'null' },
  { field: 'structured_outputs', endpoints: CHAT_CMPL, accepts: never, accepted: 'null' },
  { field: 'chat_template', endpoints: CHAT, accepts: never, accepted: 'null (the model\'s own template is used)' },
  { field: 'add_generation_prompt', endpoints: CHAT, accepts: is(true), accepted: 'true' },
  { field: 'continue_final_message', endpoints: CHAT, accepts: is(false), accepted: 'false' },
  ...REFUSED_ON_RESPONSES,
];

/** Fields accepted with any value: they cannot change what this server generates. */
export const IGNORED: readonly IgnoredField[] = [
  { field: 'user', endpoints: ALL, why: 'an end-user label; this server keeps no per-user state' },
  { field: 'safety_identifier', endpoints: CHAT_RESP, why: 'an end-user label for abuse detection' },
  { field: 'prompt_cache_key', endpoints: CHAT_RESP, why: 'a cache-routing hint; the prefix cache matches by content' },
  { field: 'prompt_cache_retention', endpoints: CHAT_RESP, why: 'a cache-lifetime hint; the prefix cache evicts by LRU' },
  { field: 'stream_options.include_obfuscation', endpoints: CHAT_RESP, why: 'padding against side channels on a shared service' },
];

/** The refusal for the first field of `raw` with a value this server would silently not honour. */
export function refuseUnsupported(endpoint: Endpoint, raw: unknown): void {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return;
  const body = raw as Readonly<Record<string, unknown>>;
  for (const r of REFUSED) {
    if (!r.endpoints.includes(endpoint)) continue;
    const value = valueAt(body, r.field);
    if (value == null || r.accepts(value, body)) continue;
    throw new ApiError('unsupported_value', `'${r.field}' is not supported by this server; it accepts only ${r.accepted} here, got ${preview(value)}.`, { param: r.field });
  }
}

function valueAt(body: Readonly<Record<string, unknown>>, path: string): unknown {
  let v: unknown = body;
  for (const k of path.split('.')) {
    if (typeof v !== 'object' || v === null || Array.isArray(v)) return undefined;
    v = (v as Record<string, unknown>)[k];
  }
  return v;
}

/** A short rendering of what the client sent (a tool list can be kilobytes). */
function preview(value: unknown): string {
  const s = JSON.stringify(value) ?? String(value);
  return s.length > 60 ? `${s.slice(0, 57)}...` : s;
}

/**
 * POST /v1/embeddings: not served. 404 `model_not_found` (param `model`), what OpenAI answers for a
 * model an endpoint cannot use: clients raise it as "not found" and never retry it, where a 400
 * would read as a malformed request and a 5xx would be retried.
 */
export function embeddingsNotServed(): ApiError {
  return new ApiError('model_not_found', 'This server does not serve embeddings: its model generates text only (/v1/chat/completions, /v1/completions, /v1/responses).', { param: 'model' });
}
