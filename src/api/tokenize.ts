// vLLM's utility endpoints, in vLLM's shapes:
//
//   POST /tokenize    {model?, prompt | messages, add_special_tokens?}  → {count, max_model_len, tokens}
//   POST /detokenize  {model?, tokens}                                   → {prompt}
//   GET  /version                                                        → {version}
//
// Invariants: /tokenize of `messages` returns exactly the prompt tokens /v1/chat/completions would
// run (the model's chat template with the assistant turn opened, BOS included), so `count` equals
// that request's usage.prompt_tokens; of `prompt`, the tokens of /v1/completions (BOS unless
// add_special_tokens is false). Tokenizing runs off the event loop like a generation request's; a
// prompt longer than the context is counted, not refused (max_model_len is there to compare).
// /detokenize refuses any id outside [0, vocabulary size) with a 400 naming its index.

import { readFileSync } from 'node:fs';
import type { Backend } from '../backend/backend.ts';
import { ApiError } from './errors.ts';
import { checkModel, encodeError } from './prepare.ts';
import { detokenizeBody, messageText, parseBody, tokenizeBody } from './schemas.ts';

export interface TokenizeResult {
  readonly count: number;
  readonly max_model_len: number;
  readonly tokens: readonly number[];
}

export async function tokenize(backend: Backend, models: readonly string[], raw: unknown): Promise<TokenizeResult> {
  const body = parseBody(tokenizeBody, raw);
  if (body.model != null) checkModel(body.model, models);
  if ((body.prompt == null) === (body.messages == null)) {
    throw new ApiError('invalid_value', 'Send exactly one of prompt (a string) or messages (a chat).', { param: body.prompt == null ? 'prompt' : 'messages' });
  }
  if (body.return_token_strs === true) throw new ApiError('unsupported_value', "'return_token_strs' is not supported by this server; it accepts only false here.", { param: 'return_token_strs' });
  const tokens = body.messages != null ? await chatTokens(backend, body.messages, body.add_generation_prompt) : await backend.tokenizer.encodeText(body.prompt!, body.add_special_tokens !== false);
  return { count: tokens.length, max_model_len: backend.info.contextTokens, tokens };
}

async function chatTokens(backend: Backend, messages: readonly { role: string; content?: Parameters<typeof messageText>[0] }[], addGenerationPrompt: boolean | null | undefined): Promise<number[]> {
  if (addGenerationPrompt === false) {
    throw new ApiError('unsupported_value', "'add_generation_prompt' is not supported by this server; it accepts only true here (the assistant turn is always opened).", { param: 'add_generation_prompt' });
  }
  const encoded = await backend.tokenizer.encodeChat({ messages: messages.map((m) => ({ role: m.role, content: messageText(m.content) })) });
  if (!encoded.ok) throw encodeError(encoded);
  return encoded.tokens;
}

export function detokenize(backend: Backend, models: readonly string[], raw: unknown): { prompt: string } {
  const body = parseBody(detokenizeBody, raw);
  if (body.model != null) checkModel(body.model, models);
  const vocab = backend.tokenizer.vocabSize;
  const bad = body.tokens.findIndex((t) => t < 0 || t >= vocab);
  if (bad >= 0) throw new ApiError('invalid_value', `Token id ${body.tokens[bad]} is outside the vocabulary [0, ${vocab}).`, { param: `tokens.${bad}` });
  const d = backend.tokenizer.detokenizer();
  let prompt = '';
  for (const t of body.tokens) prompt += d.push(t);
  return { prompt: prompt + d.flush() };
}

let cachedVersion: string | null = null;

/** The version in package.json, read once. */
export function version(): { version: string } {
  cachedVersion ??= (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;
  return { version: cachedVersion };
}
