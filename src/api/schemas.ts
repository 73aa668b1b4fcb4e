// Request bodies of the OpenAI endpoints, validated once at the edge. Known fields with a wrong type
// or an out-of-range value are a 400 naming the field. OpenAI fields that are not implemented are
// refused or listed as ignored in unsupported.ts before these schemas run; fields unknown to both
// are ignored (zod strips them), as vLLM does, so clients' vendor extensions keep working.

import { z } from 'zod';
import { ApiError } from './errors.ts';

/** Most choices (`n`) one request may ask for: each is a running sequence. */
export const MAX_CHOICES = 8;

const stop = z.union([z.string().min(1), z.array(z.string().min(1)).max(4)]).nullish();

const common = {
  model: z.string().min(1),
  max_tokens: z.number().int().min(1).nullish(),
  max_completion_tokens: z.number().int().min(1).nullish(),
  stop,
  temperature: z.number().min(0).max(2).nullish(),
  top_p: z.number().gt(0).max(1).nullish(),
  seed: z.number().int().nullish(),
  stream: z.boolean().nullish(),
  stream_options: z.object({ include_usage: z.boolean().nullish() }).nullish(),
  n: z.number().int().min(1).nullish(),
  ignore_eos: z.boolean().nullish(),
  user: z.string().nullish(),
  // Sampling beyond temperature/top_p/seed (docs/sampling.md); ranges as OpenAI and vLLM accept them.
  top_k: z.number().int().min(-1).nullish(),
  min_p: z.number().min(0).max(1).nullish(),
  presence_penalty: z.number().min(-2).max(2).nullish(),
  frequency_penalty: z.number().min(-2).max(2).nullish(),
  repetition_penalty: z.number().gt(0).max(10).nullish(),
  logit_bias: z.record(z.string().regex(/^\d+$/, 'expected token ids as keys'), z.number().min(-100).max(100)).nullish(),
  response_format: z
    .discriminatedUnion('type', [
      z.object({ type: z.literal('text') }),
      z.object({ type: z.literal('json_object') }),
      z.object({
        type: z.literal('json_schema'),
        json_schema: z.object({ name: z.string().min(1).max(64), description: z.string().nullish(), schema: z.unknown().optional(), strict: z.boolean().nullish() }),
      }),
    ])
    .nullish(),
};

const contentPart = z.object({ type: z.literal('text'), text: z.string() });
const toolCall = z.object({
  id: z.string().max(256),
  type: z.literal('function').optional(),
  function: z.object({ name: z.string().min(1).max(256), arguments: z.string() }),
});
const message = z.object({
  role: z.enum(['system', 'developer', 'user', 'assistant', 'tool']),
  // Absent only on an assistant turn that carries tool_calls (chat-request.ts checks).
  content: z.union([z.string(), z.array(contentPart).min(1)]).nullish(),
  name: z.string().optional(),
  tool_calls: z.array(toolCall).max(128).nullish(),
  tool_call_id: z.string().max(256).nullish(),
  reasoning_content: z.string().nullish(),
});
const tool = z.object({
  type: z.literal('function'),
  function: z.object({
    name: z.string().regex(/^[A-Za-z0-9_.:-]{1,64}$/, 'expected 1 to 64 letters, digits, _ . : or -'),
    description: z.string().nullish(),
    parameters: z.record(z.string(), z.unknown()).nullish(),
    strict: z.boolean().nullish(),
  }),
});
const toolChoice = z.union([z.enum(['none', 'auto', 'required']), z.object({ type: z.literal('function'), function: z.object({ name: z.string().min(1) }) })]);

export const chatCompletionBody = z.object({
  ...common,
  messages: z.array(message).min(1),
  logprobs: z.boolean().nullish(),
  top_logprobs: z.number().int().min(0).max(20).nullish(),
  tools: z.array(tool).max(128).nullish(),
  tool_choice: toolChoice.nullish(),
  parallel_tool_calls: z.boolean().nullish(),
  // Variables for the model's chat template (enable_thinking, ...); JSON values.
  chat_template_kwargs: z.record(z.string(), z.unknown()).nullish(),
  reasoning_effort: z.enum(['none', 'minimal', 'low', 'medium', 'high']).nullish(),
});
export const completionBody = z.object({
  ...common,
  logprobs: z.number().int().min(0).max(5).nullish(),
  prompt: z.union([z.string(), z.array(z.string()).length(1), z.array(z.number().int().min(0)).min(1)]),
  echo: z.boolean().nullish(),
});

/** The Responses API, text only: message items whose content is a string or text parts (responses.ts refuses other items first). */
const responsesPart = z.object({ type: z.enum(['input_text', 'output_text']), text: z.string() });
const responsesMessage = z.object({
  type: z.literal('message').optional(),
  role: z.enum(['system', 'developer', 'user', 'assistant']),
  content: z.union([z.string(), z.array(responsesPart).min(1)]),
});
/** A function call the model made earlier, and the output the client got for it. */
const responsesFunctionCall = z.object({ type: z.literal('function_call'), call_id: z.string().max(256), name: z.string().min(1).max(256), arguments: z.string(), id: z.string().nullish(), status: z.string().nullish() });
const responsesFunctionOutput = z.object({ type: z.literal('function_call_output'), call_id: z.string().max(256), output: z.string(), id: z.string().nullish(), status: z.string().nullish() });
const responsesItem = z.union([responsesMessage, responsesFunctionCall, responsesFunctionOutput]);
const responsesTool = z.object({
  type: z.literal('function'),
  name: tool.shape.function.shape.name,
  description: z.string().nullish(),
  parameters: z.record(z.string(), z.unknown()).nullish(),
  strict: z.boolean().nullish(),
});
export const responsesBody = z.object({
  model: z.string().min(1),
  input: z.union([z.string(), z.array(responsesItem).min(1)]),
  tools: z.array(responsesTool).max(128).nullish(),
  // Structured output: the same grammar as chat's response_format.
  text: z
    .object({
      format: z
        .discriminatedUnion('type', [
          z.object({ type: z.literal('text') }),
          z.object({ type: z.literal('json_object') }),
          z.object({ type: z.literal('json_schema'), name: z.string().min(1).max(64), description: z.string().nullish(), schema: z.unknown().optional(), strict: z.boolean().nullish() }),
        ])
        .nullish(),
      verbosity: z.string().nullish(),
    })
    .nullish(),
  tool_choice: z.union([z.enum(['none', 'auto', 'required']), z.object({ type: z.literal('function'), name: z.string().min(1) })]).nullish(),
  parallel_tool_calls: z.boolean().nullish(),
  instructions: z.string().nullish(),
  max_output_tokens: z.number().int().min(1).nullish(),
  temperature: common.temperature,
  top_p: common.top_p,
  stream: common.stream,
  metadata: z.record(z.string().max(64), z.string().max(512)).nullish(),
  // Extensions, as on chat: a seed for reproducible sampling, and generation past EOS.
  seed: common.seed,
  ignore_eos: common.ignore_eos,
});

/** vLLM's /tokenize and /detokenize. */
export const tokenizeBody = z.object({
  model: z.string().min(1).nullish(),
  prompt: z.string().nullish(),
  messages: z.array(message).min(1).nullish(),
  add_special_tokens: z.boolean().nullish(),
  add_generation_prompt: z.boolean().nullish(),
  return_token_strs: z.boolean().nullish(),
});
export const detokenizeBody = z.object({
  model: z.string().min(1).nullish(),
  tokens: z.array(z.number().int()),
});

export type ChatCompletionBody = z.infer<typeof chatCompletionBody>;
export type CompletionBody = z.infer<typeof completionBody>;
export type ResponsesBody = z.infer<typeof responsesBody>;
export type TokenizeBody = z.infer<typeof tokenizeBody>;
export type DetokenizeBody = z.infer<typeof detokenizeBody>;

/** Parse or throw the 400 that names the first offending field. */
export function parseBody<T>(schema: z.ZodType<T>, body: unknown): T {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new ApiError('invalid_value', 'The request body must be a JSON object.');
  }
  const r = schema.safeParse(body);
  if (r.success) return r.data;
  const issue = r.error.issues[0]!;
  const param = issue.path.map(String).join('.') || null;
  const missing = issue.code === 'invalid_type' && valueAt(body, issue.path) === undefined;
  const msg = missing ? `Missing required parameter: '${param}'.` : `Invalid value for '${param ?? 'body'}': ${issue.message}`;
  throw new ApiError(missing ? 'missing_field' : 'invalid_value', msg, { param });
}

/** Values we accept only within bounds, and fields that depend on another. */
export function checkSupported(body: {
  n?: number | null | undefined;
  stream?: boolean | null | undefined;
  stream_options?: unknown;
}): void {
  if (body.stream_options != null && body.stream !== true) {
    throw new ApiError('invalid_value', 'stream_options is only allowed when stream is true.', { param: 'stream_options' });
  }
  if (body.n != null && body.n > MAX_CHOICES) {
    throw new ApiError('unsupported_value', `n is at most ${MAX_CHOICES} on this server; got n=${body.n}.`, { param: 'n' });
  }
}

/** Message content as plain text (array content: the text parts joined). */
export function messageText(content: string | readonly { text: string }[] | null | undefined): string {
  if (content == null) return '';
  return typeof content === 'string' ? content : content.map((p) => p.text).join('');
}

function valueAt(root: unknown, path: readonly PropertyKey[]): unknown {
  let v = root;
  for (const k of path) {
    if (typeof v !== 'object' || v === null) return undefined;
    v = (v as Record<PropertyKey, unknown>)[k];
  }
  return v;
}
