// A deterministic tokenizer for the mock runner, shaped like a byte-fallback SPM vocabulary:
//   0 <unk>, 1 <s>, 2 </s>, 3..258 the 256 byte tokens, 259.. word pieces.
// Encoding is greedy longest-match over word pieces, falling back to single bytes, so any text
// (any UTF-8) encodes and decodes back to itself. Multi-byte characters without a word piece
// become several byte tokens: the detokenizer must reassemble them (as with a real model).

import { ByteDetokenizer } from '../byte-detokenizer.ts';
import type { ChatMessage, ChatRequest, EncodeResult, IncrementalDetokenizer, Tokenizer } from '../../tokenizer.ts';
import { templateBytesPerMessage } from '../template-probe.ts';

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
export const MAX_PIECE_BYTES = Math.max(...PIECE_BYTES.map((b) => b.length));

export const MOCK_VOCAB_SIZE = WORD_BASE + PIECES.length;
/** Tokens the mock generator samples from: every word piece plus the bytes of an emoji (split across tokens on purpose). */
export const MOCK_GENERATION_POOL: readonly number[] = [
  ...PIECES.map((_, i) => WORD_BASE + i),
];
export const EMOJI_BYTE_TOKENS: readonly number[] = [...Buffer.from('🙂', 'utf8')].map((b) => BYTE_BASE + b);

// A byte trie over the pieces: node n's child for byte b is CHILD[n * 256 + b] (0 = none; the root
// is node 0 and never a child), TOKEN_AT[n] the piece ending at n (-1 = none). Longest match is one
// walk from each position, so encoding is linear in the input with a small constant.
const { CHILD, TOKEN_AT } = (() => {
  const child: number[] = new Array<number>(256).fill(0);
  const tokenAt: number[] = [-1];
  PIECE_BYTES.forEach((bytes, i) => {
    let node = 0;
    for (const b of bytes) {
      let next = child[node * 256 + b]!;
      if (next === 0) {
        next = tokenAt.length;
        tokenAt.push(-1);
        for (let k = 0; k < 256; k++) child.push(0);
        child[node * 256 + b] = next;
      }
      node = next;
    }
    tokenAt[node] = WORD_BASE + i;
  });
  return { CHILD: Int32Array.from(child), TOKEN_AT: Int32Array.from(tokenAt) };
})();

/** Greedy longest match from `i`; appends one token and returns the next position. */
function step(bytes: Uint8Array, i: number, out: number[]): number {
  let node = 0;
  let bestLen = 0;
  let best = -1;
  for (let j = i; j < bytes.length && j - i < MAX_PIECE_BYTES; j++) {
    node = CHILD[node * 256 + bytes[j]!]!;
    if (node === 0) break;
    const t = TOKEN_AT[node]!;
    if (t >= 0) {
      best = t;
      bestLen = j - i + 1;
    }
  }
  if (best < 0) {
    out.push(BYTE_BASE + bytes[i]!);
    return i + 1;
  }
  out.push(best);
  return i + bestLen;
}

export function encode(text: string, addBos: boolean): number[] {
  const bytes = Buffer.from(text, 'utf8');
  const out: number[] = addBos ? [BOS_ID] : [];
  for (let i = 0; i < bytes.length; ) i = step(bytes, i, out);
  return out;
}

/** encode(), yielding to the event loop every `sliceBytes` bytes so a long prompt never stalls it. */
export async function encodeAsync(text: string, addBos: boolean, sliceBytes = 16 * 1024): Promise<number[]> {
  const bytes = Buffer.from(text, 'utf8');
  const out: number[] = addBos ? [BOS_ID] : [];
  let i = 0;
  while (i < bytes.length) {
    const end = i + sliceBytes;
    while (i < bytes.length && i < end) i = step(bytes, i, out);
    if (i < bytes.length) await new Promise<void>((r) => setImmediate(r));
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
  readonly maxTokenBytes = MAX_PIECE_BYTES;
  readonly templateBytesPerMessage = templateBytesPerMessage((m) => this.applyChatTemplate(m));

  tokenize(text: string, addBos: boolean): number[] {
    return encode(text, addBos);
  }

  encodeText(text: string, addBos: boolean): Promise<number[]> {
    return encodeAsync(text, addBos);
  }

  async encodeChat(chat: ChatRequest): Promise<EncodeResult> {
    return { ok: true, tokens: await encodeAsync(this.applyChatTemplate(chat.messages), true) };
  }

  detokenizer(): IncrementalDetokenizer {
    return new ByteDetokenizer(tokenBytes);
  }

  tokenBytes(token: number): Uint8Array {
    return tokenBytes(token);
  }

  applyChatTemplate(messages: readonly ChatMessage[]): string {
    return messages.map((m) => `<|im_start|>${m.role}\n${m.content}<|im_end|>\n`).join('') + '<|im_start|>assistant\n';
  }

  isEog(token: number): boolean {
    return token === EOS_ID;
  }
}
