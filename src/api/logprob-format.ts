// Log-probabilities in OpenAI's two shapes. A token is named by the text of its bytes; bytes that
// are not whole UTF-8 (a byte-fallback token holding part of a character) are written as \xNN
// escapes, and chat entries carry the raw `bytes` as OpenAI's do, so a client can join them.
//
//   chat:        {content: [{token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]}], refusal: null}
//   completions: {tokens, token_logprobs, top_logprobs: [{token: logprob}], text_offset}

import type { TokenLogprob } from '../engine/plan.ts';
import type { Tokenizer } from '../engine/tokenizer.ts';

export interface TokenName {
  readonly token: string;
  readonly bytes: readonly number[];
}

/** One billed token's log-probability and its alternatives, named. */
export interface LogprobEntry extends TokenName {
  readonly logprob: number;
  readonly top: readonly (TokenName & { readonly logprob: number })[];
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

export function tokenName(tokenizer: Tokenizer, tokenId: number): TokenName {
  const raw = tokenizer.tokenBytes(tokenId);
  const bytes = Array.from(raw);
  try {
    return { token: utf8.decode(raw), bytes };
  } catch {
    return { token: bytes.map((b) => `\\x${b.toString(16).padStart(2, '0')}`).join(''), bytes };
  }
}

export function logprobEntry(tokenizer: Tokenizer, tokenId: number, lp: TokenLogprob): LogprobEntry {
  return { ...tokenName(tokenizer, tokenId), logprob: lp.logprob, top: lp.top.map((t) => ({ ...tokenName(tokenizer, t.tokenId), logprob: t.logprob })) };
}

/** Chat's `logprobs` field for these entries. */
export function chatLogprobs(entries: readonly LogprobEntry[]): unknown {
  return {
    content: entries.map((e) => ({ token: e.token, logprob: e.logprob, bytes: e.bytes, top_logprobs: e.top.map((t) => ({ token: t.token, logprob: t.logprob, bytes: t.bytes })) })),
    refusal: null,
  };
}

/** Completions' `logprobs` field; `offset` is where the first entry's text starts in the choice's text. */
export function completionLogprobs(entries: readonly LogprobEntry[], offset: number): unknown {
  const textOffset: number[] = [];
  let at = offset;
  for (const e of entries) {
    textOffset.push(at);
    at += e.token.length;
  }
  return {
    tokens: entries.map((e) => e.token),
    token_logprobs: entries.map((e) => e.logprob),
    top_logprobs: entries.map((e) => Object.fromEntries(e.top.map((t) => [t.token, t.logprob]))),
    text_offset: textOffset,
  };
}

/** Characters the entries' token names cover (the next text_offset after them). */
export function namedLength(entries: readonly LogprobEntry[]): number {
  return entries.reduce((n, e) => n + e.token.length, 0);
}
