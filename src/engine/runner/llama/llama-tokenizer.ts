// The llama.cpp tokenizer of a loaded model: tokenize, chat template, token pieces and EOG flags,
// all through the addon's context (the same model the runner decodes with). Pieces and EOG flags
// are cached per token id: detokenizing a stream costs one native call per distinct token.

import { ByteDetokenizer } from '../byte-detokenizer.ts';
import type { ChatMessage, IncrementalDetokenizer, Tokenizer } from '../../tokenizer.ts';
import type { AddonContext } from './addon.ts';

export class LlamaTokenizer implements Tokenizer {
  readonly vocabSize: number;
  /** The template applied to chat requests: the GGUF's when llama.cpp recognises it, else 'chatml'. */
  readonly chatTemplate: string;
  readonly #ctx: AddonContext;
  readonly #pieces = new Map<number, Uint8Array>();
  readonly #eog = new Map<number, boolean>();

  constructor(ctx: AddonContext, vocabSize: number) {
    this.#ctx = ctx;
    this.vocabSize = vocabSize;
    const gguf = ctx.chatTemplate();
    const probe = [{ role: 'user', content: 'x' }];
    this.chatTemplate = gguf !== null && ctx.applyChatTemplate(probe, gguf) !== null ? gguf : 'chatml';
  }

  /** How /stats describes the template in use. */
  get chatTemplateSource(): string {
    if (this.chatTemplate !== 'chatml') return 'gguf';
    return this.#ctx.chatTemplate() === null ? 'chatml (none in GGUF)' : 'chatml (GGUF template not recognised)';
  }

  tokenize(text: string, addBos: boolean): number[] {
    return Array.from(this.#ctx.tokenize(text, addBos, true));
  }

  detokenizer(): IncrementalDetokenizer {
    return new ByteDetokenizer((t) => this.#piece(t));
  }

  applyChatTemplate(messages: readonly ChatMessage[]): string {
    const msgs = messages.map((m) => ({ role: m.role, content: m.content }));
    const text = this.#ctx.applyChatTemplate(msgs, this.chatTemplate);
    if (text === null) throw new Error(`bug: chat template ${this.chatTemplate.slice(0, 40)} was accepted at load but not now`);
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
