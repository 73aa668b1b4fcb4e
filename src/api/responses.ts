// POST /v1/responses, text and function calls: the body becomes a chat request (instructions as
// the system message, then the input messages; function_call items become an assistant turn's
// tool_calls, function_call_output items tool messages; tools and tool_choice map to chat's), runs
// the one generation path (completions.ts), and is framed as a Response (responses-framer.ts).
//
// Refused with 400 `unsupported_value` before the schema runs: every field in unsupported.ts's
// table for `responses` (previous_response_id, store=true, reasoning, ...), and
// any input item that is not a text message (images, files, function-call outputs, item
// references: nothing is stored, so nothing can be referenced). Nothing is stored: the response
// says `store: false`, and there is no GET /v1/responses/{id}.

import { ApiError } from './errors.ts';
import type { SizeFacts } from './limits.ts';
import { checkMessageCount } from './limits.ts';
import { checkModel } from './prepare.ts';
import type { Parsed } from './prepare.ts';
import { ResponsesFramer } from './responses-framer.ts';
import type { ResponseEcho } from './responses-framer.ts';
import type { ChatCompletionBody, ResponsesBody } from './schemas.ts';
import { parseBody, responsesBody } from './schemas.ts';
import type { Surface, SurfaceRequest } from './surface.ts';
import { refuseUnsupported } from './unsupported.ts';

const TEXT_PARTS = new Set(['input_text', 'output_text']);

export const responsesSurface: Surface = {
  idPrefix: 'resp',
  parse(raw: unknown, models: readonly string[], size: SizeFacts): SurfaceRequest {
    const input = typeof raw === 'object' && raw !== null ? (raw as { input?: unknown }).input : undefined;
    // Before renameError exists: named in Responses' own terms.
    checkMessageCount(size, raw, 'input');
    refuseUnsupported('responses', raw);
    refuseNonTextInput(input);
    const body = parseBody(responsesBody, raw);
    checkModel(body.model, models);
    const hasInstructions = body.instructions != null;
    const echo: ResponseEcho = {
      instructions: body.instructions ?? null,
      tools: body.tools ?? [],
      toolChoice: body.tool_choice ?? (body.tools != null && body.tools.length > 0 ? 'auto' : 'none'),
      parallelToolCalls: body.parallel_tool_calls ?? (body.tools != null && body.tools.length > 0),
      textFormat: body.text?.format ?? { type: 'text' },
      maxOutputTokens: body.max_output_tokens ?? null,
      temperature: body.temperature ?? 1,
      topP: body.top_p ?? 1,
      metadata: body.metadata ?? {},
    };
    return {
      parsed: { kind: 'chat', body: toChat(body) } satisfies Parsed,
      renameError: (e) => renameParam(e, hasInstructions, typeof body.input === 'string'),
      framing: (id, createdS, p) => new ResponsesFramer(id, createdS, p.model, echo),
    };
  },
};

function toChat(body: ResponsesBody): ChatCompletionBody {
  const messages: ChatCompletionBody['messages'] = [];
  if (body.instructions != null) messages.push({ role: 'system', content: body.instructions });
  if (typeof body.input === 'string') messages.push({ role: 'user', content: body.input });
  else {
    for (const m of body.input) {
      if (m.type === 'function_call') {
        // Consecutive calls are one assistant turn, as chat carries them.
        const call = { id: m.call_id, type: 'function' as const, function: { name: m.name, arguments: m.arguments } };
        const last = messages[messages.length - 1];
        if (last !== undefined && last.role === 'assistant' && last.tool_calls != null && last.content == null) last.tool_calls.push(call);
        else messages.push({ role: 'assistant', content: null, tool_calls: [call] });
      } else if (m.type === 'function_call_output') {
        messages.push({ role: 'tool', tool_call_id: m.call_id, content: m.output });
      } else {
        messages.push({ role: m.role, content: typeof m.content === 'string' ? m.content : m.content.map((p) => ({ type: 'text' as const, text: p.text })) });
      }
    }
  }
  const choice = body.tool_choice;
  return {
    model: body.model,
    messages,
    ...(body.tools != null ? { tools: body.tools.map((t) => ({ type: 'function' as const, function: { name: t.name, description: t.description, parameters: t.parameters, strict: t.strict } })) } : {}),
    ...(choice != null ? { tool_choice: typeof choice === 'string' ? choice : { type: 'function' as const, function: { name: choice.name } } } : {}),
    ...(body.parallel_tool_calls != null ? { parallel_tool_calls: body.parallel_tool_calls } : {}),
    ...(responseFormat(body.text?.format) ?? {}),
    max_tokens: body.max_output_tokens,
    temperature: body.temperature,
    top_p: body.top_p,
    stream: body.stream,
    seed: body.seed,
    ignore_eos: body.ignore_eos,
  };
}

/** Responses' `text.format` as chat's `response_format` (the same grammar). */
function responseFormat(f: NonNullable<ResponsesBody['text']>['format']): Pick<ChatCompletionBody, 'response_format'> | null {
  if (f == null || f.type === 'text') return null;
  if (f.type === 'json_object') return { response_format: { type: 'json_object' } };
  return { response_format: { type: 'json_schema', json_schema: { name: f.name, description: f.description, schema: f.schema, strict: f.strict } } };
}

/** Input items this server cannot read are refused by name, not by a schema's generic message. */
function refuseNonTextInput(input: unknown): void {
  if (!Array.isArray(input)) return;
  for (const [i, item] of input.entries()) {
    if (typeof item !== 'object' || item === null) continue;
    const type = (item as { type?: unknown }).type;
    if (type === 'item_reference') {
      throw new ApiError('unsupported_value', "Input items of type 'item_reference' refer to stored output; this server stores none. Send earlier turns inline as messages (the AI SDK does with providerOptions.openai.store = false).", { param: `input.${i}` });
    }
    if (type === 'function_call' || type === 'function_call_output') continue;
    if (type !== undefined && type !== 'message') {
      throw new ApiError('unsupported_value', `Input items of type ${JSON.stringify(type)?.slice(0, 40) ?? 'undefined'} are not supported by this server; it reads messages (role and content), function_call and function_call_output items.`, { param: `input.${i}` });
    }
    const content = (item as { content?: unknown }).content;
    if (!Array.isArray(content)) continue;
    for (const [j, part] of content.entries()) {
      const partType = typeof part === 'object' && part !== null ? (part as { type?: unknown }).type : undefined;
      if (typeof partType === 'string' && !TEXT_PARTS.has(partType)) {
        throw new ApiError('unsupported_value', `Content of type ${JSON.stringify(partType).slice(0, 40)} is not supported by this server; it reads text only (input_text, output_text).`, { param: `input.${i}.content.${j}` });
      }
    }
  }
}

/** Preparing names chat fields (`max_tokens`, `messages.N`); the client sent Responses ones. */
function renameParam(e: ApiError, hasInstructions: boolean, inputIsString: boolean): ApiError {
  const p = e.param;
  if (p === null) return e;
  let renamed = p;
  if (p === 'max_tokens' || p === 'max_completion_tokens') renamed = 'max_output_tokens';
  else if (p === 'response_format' || p.startsWith('response_format.')) renamed = `text.format${p.slice('response_format'.length).replace(/^\.json_schema/, '')}`;
  else if (p === 'messages') renamed = 'input';
  else {
    const m = /^messages\.(\d+)(.*)$/.exec(p);
    if (m !== null) {
      const i = Number(m[1]) - (hasInstructions ? 1 : 0);
      renamed = i < 0 ? 'instructions' : inputIsString ? 'input' : `input.${i}${m[2]}`;
    }
  }
  return renamed === p ? e : new ApiError(e.code, e.message, { param: renamed, retryAfterS: e.retryAfterS });
}
