// The llama.cpp tokenizer of a loaded model: tokenize, chat template, token pieces and EOG flags,
// all through the addon's context (the same model the runner decodes with). Pieces and EOG flags
// are cached per token id: detokenizing a stream costs one native call per distinct token.
// Request prompts are templated and tokenized on libuv's pool by the addon's linear tokenizer
// (encodeText/encodeChat), at most TOKENIZE_CONCURRENCY at once; `settled()` waits for them.

import { ByteDetokenizer } from '../byte-detokenizer.ts';
import type { ChatMessage, EncodeResult, IncrementalDetokenizer, Tokenizer } from '../../tokenizer.ts';
import { templateBytesPerMessage } from '../template-probe.ts';
import type { AddonContext } from './addon.ts';
import { Gate } from './gate.ts';
import { bug } from '../../../util/bug.ts';

/** Prompts templated and tokenized at once on libuv's pool: fewer than its threads, so a decode always finds one. */
const TOKENIZE_CONCURRENCY = 2;

export class LlamaTokenizer implements Tokenizer {
  readonly vocabSize: number;
  readonly maxTokenBytes: number;
  readonly templateBytesPerMessage: number;
  /** The template applied to chat requests: the GGUF's when llama.cpp recognises it, else 'chatml'. */
  readonly chatTemplate: string;
  readonly #ctx: AddonContext;
  readonly #pieces = new Map<number, Uint8Array>();
  readonly #eog = new Map<number, boolean>();
  readonly #gate = new Gate(TOKENIZE_CONCURRENCY);

  constructor(ctx: AddonContext, vocabSize: number, maxTokenBytes: number) {
    this.#ctx = ctx;
    this.vocabSize = vocabSize;
    this.maxTokenBytes = maxTokenBytes;
    const gguf = ctx.chatTemplate();
    const probe = [{ role: 'user', content: 'x' }];
    this.chatTemplate = gguf !== null && ctx.applyChatTemplate(probe, gguf) !== null ? gguf : 'chatml';
    this.templateBytesPerMessage = templateBytesPerMessage((m) => this.applyChatTemplate(m));
  }

  /** Resolves when no tokenization is in flight (before the context is closed). */
  settled(): Promise<void> {
    return this.#gate.settled();
  }

  /** How /stats describes the template in use. */
  get chatTemplateSource(): string {
    if (this.chatTemplate !== 'chatml') return 'gguf';
    return this.#ctx.chatTemplate() === null ? 'chatml (none in GGUF)' : 'chatml (GGUF template not recognised)';
  }

  tokenize(text: string, addBos: boolean): number[] {
    return Array.from(this.#ctx.tokenize(text, addBos, true));
  }

  async encodeText(text: string, addBos: boolean): Promise<number[]> {
    const r = await this.#gate.run(() => this.#ctx.tokenizeAsync(text, addBos));
    if (r.status !== 0) bug(`tokenizeAsync resolved with status ${r.status}`);
    return Array.from(r.tokens);
  }

  async encodeChat(messages: readonly ChatMessage[]): Promise<EncodeResult> {
    const msgs = messages.map((m) => ({ role: m.role, content: m.content }));
    const r = await this.#gate.run(() => this.#ctx.chatTokenizeAsync(msgs, this.chatTemplate, true));
    if (r.status === 2) {
      return { ok: false, reason: 'nul_in_template', message: "This model's chat template cannot carry the NUL characters in the messages exactly." };
    }
    if (r.status !== 0) bug(`chat template ${this.chatTemplate.slice(0, 40)} was accepted at load but not now (status ${r.status})`);
    return { ok: true, tokens: Array.from(r.tokens) };
  }

  detokenizer(): IncrementalDetokenizer {
    return new ByteDetokenizer((t) => this.#piece(t));
  }

  tokenBytes(token: number): Uint8Array {
    return this.#piece(token);
  }

  /** llama.cpp parses the grammar against this vocabulary (on the calling thread; grammars are small). */
  readonly checkGrammar = (gbnf: string): boolean => this.#ctx.checkGrammar(gbnf);

  applyChatTemplate(messages: readonly ChatMessage[]): string {
    const msgs = messages.map((m) => ({ role: m.role, content: m.content }));
    const text = this.#ctx.applyChatTemplate(msgs, this.chatTemplate);
    if (text === null) bug(`chat template ${this.chatTemplate.slice(0, 40)} was accepted at load but not now`);
    return text;
  }

  isEog(token: number): boolean {
    let v = this.#eog.get(token);
    if (v === undefined) {
      v = this.#ctx.isEog(token);
      this.#eog.set(token, v);
    }
    return v;
  }

  #piece(token: number): Uint8Array {
    let p = this.#pieces.get(token);
    if (p === undefined) {
      p = new Uint8Array(this.#ctx.tokenPiece(token));
      this.#pieces.set(token, p);
    }
    return p;
  }
}
