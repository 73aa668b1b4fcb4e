// A deterministic tokenizer for the mock runner, shaped like a byte-fallback SPM vocabulary:
//   0 <unk>, 1 <s>, 2 </s>, 3..258 the 256 byte tokens, 259.. word pieces.
// Encoding is greedy longest-match over word pieces, falling back to single bytes, so any text
// (any UTF-8) encodes and decodes back to itself. Multi-byte characters without a word piece
// become several byte tokens: the detokenizer must reassemble them (as with a real model).

import { ByteDetokenizer } from '../byte-detokenizer.ts';
import type { ChatMessage, IncrementalDetokenizer, Tokenizer } from '../../tokenizer.ts';

export const UNK_ID = 0;
export const BOS_ID = 1;
export const EOS_ID = 2;
const BYTE_BASE = 3;
const WORD_BASE = BYTE_BASE + 256;

const WORDS = [
  'the', 'a', 'of', 'to', 'and', 'in', 'is', 'it', 'that', 'for', 'on', 'with', 'as', 'was', 'be', 'by', 'at', 'this',
  'from', 'or', 'an', 'are', 'but', 'not', 'have', 'they', 'which', 'one', 'you', 'were', 'all', 'we', 'can', 'her',
  'has', 'there', 'been', 'if', 'more', 'when', 'will', 'would', 'who', 'so', 'no', 'model', 'token', 'latency',
  'budget', 'queue', 'batch', 'cache', 'prefix', 'request', 'server', 'stream', 'time', 'fast', 'slow', 'load',
  'system', 'user', 'assistant', 'hello', 'world', 'headroom', 'engine', 'block', 'step', 'river', 'stone', 'light',
];
/** Word pieces with a leading space, bare, and a few characters that are multi-byte in UTF-8. */
const PIECES: readonly string[] = [
  ...WORDS.map((w) => ` ${w}`),
  ...WORDS,
  '.', ',', '!', '?', '\n', ' ', 'é', ' café', 'über', ' naïve', '日本', '語', ' 東京',
];
const PIECE_BYTES = PIECES.map((p) => Buffer.from(p, 'utf8'));
const MAX_PIECE_BYTES = Math.max(...PIECE_BYTES.map((b) => b.length));
const PIECE_BY_KEY = new Map<string, number>(PIECE_BYTES.map((b, i) => [b.toString('latin1'), WORD_BASE + i]));

export const MOCK_VOCAB_SIZE = WORD_BASE + PIECES.length;
/** Tokens the mock generator samples from: every word piece plus the bytes of an emoji (split across tokens on purpose). */
export const MOCK_GENERATION_POOL: readonly number[] = [
  ...PIECES.map((_, i) => WORD_BASE + i),
];
export const EMOJI_BYTE_TOKENS: readonly number[] = [...Buffer.from('🙂', 'utf8')].map((b) => BYTE_BASE + b);

export function encode(text: string, addBos: boolean): number[] {
  const bytes = Buffer.from(text, 'utf8');
  const out: number[] = addBos ? [BOS_ID] : [];
  let i = 0;
  while (i < bytes.length) {
    let matched = 0;
    for (let len = Math.min(MAX_PIECE_BYTES, bytes.length - i); len > 0; len--) {
      const id = PIECE_BY_KEY.get(bytes.toString('latin1', i, i + len));
      if (id !== undefined) {
        out.push(id);
        matched = len;
        break;
      }
    }
    if (matched === 0) {
      out.push(BYTE_BASE + bytes[i]!);
      matched = 1;
    }
    i += matched;
  }
  return out;
}

/** The raw bytes a token stands for (control tokens stand for nothing). */
export function tokenBytes(token: number): Uint8Array {
  if (token >= WORD_BASE && token < MOCK_VOCAB_SIZE) return PIECE_BYTES[token - WORD_BASE]!;
  if (token >= BYTE_BASE && token < WORD_BASE) return Uint8Array.of(token - BYTE_BASE);
  return new Uint8Array(0);
}

/** The mock vocabulary as a Tokenizer, with a ChatML-shaped template. */
export class MockTokenizer implements Tokenizer {
  readonly vocabSize = MOCK_VOCAB_SIZE;

  tokenize(text: string, addBos: boolean): number[] {
    return encode(text, addBos);
  }

  detokenizer(): IncrementalDetokenizer {
    return new ByteDetokenizer(tokenBytes);
  }

  applyChatTemplate(messages: readonly ChatMessage[]): string {
    return messages.map((m) => `<|im_start|>${m.role}\n${m.content}<|im_end|>\n`).join('') + '<|im_start|>assistant\n';
  }

  isEog(token: number): boolean {
    return token === EOS_ID;
  }
}
