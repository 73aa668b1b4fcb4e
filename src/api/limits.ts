// Checks that run before any tokenizing: they refuse, in microseconds, a prompt that cannot fit
// the context, and bound the latency budget a client may ask for.
//
// Why they cannot refuse a prompt that fits. Every token of the prompt stands for a contiguous,
// non-overlapping span of the templated text, at most M = the tokenizer's maxTokenBytes bytes long
// (the longest piece; a special token by its text). The spans cover every byte of the text (a
// byte-fallback SPM vocabulary has a token for every byte; an SPM space prefix only adds to what
// is covered), so a text of B bytes has T ≥ ⌈B / M⌉ tokens. A runner that cannot promise this (a
// vocabulary whose special tokens strip whitespace, a normalising tokenizer) reports M = Infinity
// and these checks never refuse. For chat, a model's template renders the content of every user,
// system, developer and tool message (possibly trimmed of surrounding whitespace, so we count the
// content's trimmed bytes; JS trims a superset of C's isspace, so we undercount); an assistant
// turn's content is not counted, since templates may drop parts of it (Qwen3 strips earlier
// reasoning). Every message but the first and the last adds at least F = the tokenizer's
// templateBytesPerMessage bytes of its own, measured on the template at load (a first system
// message may replace a longer default one; the last may be an assistant turn that is continued in
// place of the generation prompt). So
//   T_chat ≥ ⌈(Σ trimmedBytes(counted content_i) + (n−2)·F) / M⌉,
// and a request is refused here only when that lower bound already reaches the context, the same
// test completions.ts applies to the exact count after tokenizing (T ≥ ctx, or T + max_tokens > ctx).
// Message count and per-message length are the two ends of that sum and get their own messages.

import { ApiError } from './errors.ts';
import { topLevelArrayLength } from './json-scan.ts';
import type { Backend } from '../backend/backend.ts';

/** What the checks need to know of the model: its context and its tokenizer's byte bounds. */
export interface SizeFacts {
  readonly contextTokens: number;
  /** Most bytes one token stands for (Infinity: no bound, checks off). */
  readonly maxTokenBytes: number;
  /** Fewest bytes the chat template adds per message. */
  readonly templateBytesPerMessage: number;
}

export function sizeFacts(b: Backend): SizeFacts {
  return { contextTokens: b.info.contextTokens, maxTokenBytes: b.tokenizer.maxTokenBytes, templateBytesPerMessage: b.tokenizer.templateBytesPerMessage };
}

/** Bodies above this size get their message count read from the bytes before JSON.parse. */
export const RAW_SCAN_MIN_BYTES = 64 * 1024;

/** A lower bound on the tokens of `bytes` bytes of text. */
export function minTokens(info: SizeFacts, bytes: number): number {
  return Number.isFinite(info.maxTokenBytes) ? Math.ceil(bytes / info.maxTokenBytes) : 0;
}

/** Throws context_length_exceeded when `lowerBound` tokens (plus max_tokens) cannot fit `ctx`. */
function refuseIfOver(ctx: number, lowerBound: number, maxTokens: number | null, param: string, what: string): void {
  if (lowerBound >= ctx) {
    throw new ApiError('context_length_exceeded', `This model's maximum context length is ${ctx} tokens; ${what} has at least ${lowerBound}.`, { param });
  }
  if (maxTokens !== null && lowerBound + maxTokens > ctx) {
    throw new ApiError('context_length_exceeded', `This model's maximum context length is ${ctx} tokens; ${what} has at least ${lowerBound}, and ${maxTokens} were requested for the completion.`, { param: 'max_tokens' });
  }
}

/** Before tokenizing a completion prompt. */
export function checkPromptSize(info: SizeFacts, text: string, maxTokens: number | null): void {
  refuseIfOver(info.contextTokens, minTokens(info, Buffer.byteLength(text, 'utf8')), maxTokens, 'prompt', 'the prompt');
}

/** Before validating a body: the message count alone (so 30,000 messages cost no schema work); `field` holds them (chat `messages`, Responses `input`). */
export function checkMessageCount(info: SizeFacts, raw: unknown, field: 'messages' | 'input' = 'messages'): void {
  const messages = typeof raw === 'object' && raw !== null ? (raw as Record<string, unknown>)[field] : undefined;
  if (!Array.isArray(messages)) return;
  refuseIfOver(info.contextTokens, minTokens(info, Math.max(0, messages.length - 2) * info.templateBytesPerMessage), null, field, `a conversation of ${messages.length} messages`);
}

/**
 * Before JSON.parse of a large chat body: the message count read from the bytes (json-scan.ts),
 * so a body of 30,000 tiny messages costs no object allocation. A key written with escapes is not
 * recognised and the body takes the ordinary path (checkMessageCount after parsing).
 */
export function checkRawMessageCount(info: SizeFacts, body: Uint8Array): void {
  if (body.length < RAW_SCAN_MIN_BYTES) return;
  const n = topLevelArrayLength(body, 'messages');
  if (n !== null && n > 2) refuseIfOver(info.contextTokens, minTokens(info, (n - 2) * info.templateBytesPerMessage), null, 'messages', `a conversation of ${n} messages`);
}

/** Before templating chat messages: message count, each message, then the whole (assistant content not counted, see above). */
export function checkMessagesSize(info: SizeFacts, messages: readonly { readonly role: string; readonly content: string }[], maxTokens: number | null): void {
  const ctx = info.contextTokens;
  const perMessage = info.templateBytesPerMessage;
  refuseIfOver(ctx, minTokens(info, Math.max(0, messages.length - 2) * perMessage), maxTokens, 'messages', `a conversation of ${messages.length} messages`);
  let total = Math.max(0, messages.length - 2) * perMessage;
  for (const [i, m] of messages.entries()) {
    if (m.role === 'assistant') continue;
    const bytes = Buffer.byteLength(m.content.trim(), 'utf8');
    refuseIfOver(ctx, minTokens(info, bytes), maxTokens, `messages.${i}.content`, `message ${i}`);
    total += bytes;
  }
  refuseIfOver(ctx, minTokens(info, total), maxTokens, 'messages', 'the conversation');
}

/**
 * The latency budget of a request: the server default, or `x-slo-ms` when it lies in
 * [minSloMs, maxSloMs]. Outside the range it is a 400, never a clamp: a budget below the minimum
 * can never be met (and would let a client jump the EDF queue), so it is refused at once instead
 * of queued; one above the maximum is a client error.
 */
export function sloFromHeader(h: string | string[] | undefined, bounds: { readonly sloMs: number; readonly minSloMs: number; readonly maxSloMs: number }): number {
  if (h === undefined) return bounds.sloMs;
  const v = Array.isArray(h) ? h[0] : h;
  const n = Number(v);
  if (v === undefined || !/^\d{1,16}$/.test(v.trim()) || !Number.isSafeInteger(n)) {
    throw new ApiError('invalid_value', `x-slo-ms must be an integer number of milliseconds in [${bounds.minSloMs}, ${bounds.maxSloMs}]; got '${String(v).slice(0, 40)}'.`, { param: 'x-slo-ms' });
  }
  if (n < bounds.minSloMs) {
    throw new ApiError('invalid_value', `x-slo-ms ${n} is below this server's minimum of ${bounds.minSloMs} ms, a budget it cannot meet; ask for at least ${bounds.minSloMs}.`, { param: 'x-slo-ms' });
  }
  if (n > bounds.maxSloMs) {
    throw new ApiError('invalid_value', `x-slo-ms ${n} is above this server's maximum of ${bounds.maxSloMs} ms.`, { param: 'x-slo-ms' });
  }
  return n;
}
