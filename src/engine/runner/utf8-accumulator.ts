// Bytes in, whole UTF-8 characters out. Tokens of byte-fallback tokenizers carry single bytes of
// multi-byte characters; a stream must never show a client half a character, so bytes wait here
// until the character they belong to is complete.
//
// O(1) amortised per byte: at most 3 bytes are ever held back.

/** Length of the UTF-8 sequence a lead byte starts, or 0 for a continuation/invalid lead byte. */
function sequenceLength(lead: number): number {
  if (lead < 0x80) return 1;
  if (lead >= 0xc2 && lead <= 0xdf) return 2;
  if (lead >= 0xe0 && lead <= 0xef) return 3;
  if (lead >= 0xf0 && lead <= 0xf4) return 4;
  return 0;
}

export class Utf8Accumulator {
  #pending: number[] = [];
  readonly #decoder = new TextDecoder('utf-8', { fatal: false });

  /** Append bytes; return the text of every character now complete. */
  push(bytes: Uint8Array): string {
    for (const b of bytes) this.#pending.push(b);
    const cut = this.#completePrefixLength();
    if (cut === 0) return '';
    const text = this.#decoder.decode(Uint8Array.from(this.#pending.slice(0, cut)));
    this.#pending = this.#pending.slice(cut);
    return text;
  }

  /** Release whatever is held (an incomplete tail becomes U+FFFD). */
  flush(): string {
    if (this.#pending.length === 0) return '';
    const text = this.#decoder.decode(Uint8Array.from(this.#pending));
    this.#pending = [];
    return text;
  }

  /** Bytes from the start that form complete characters (invalid bytes count as complete: they decode to U+FFFD). */
  #completePrefixLength(): number {
    const p = this.#pending;
    // Only the last ≤ 3 bytes can belong to an unfinished character.
    for (let back = 1; back <= Math.min(3, p.length); back++) {
      const i = p.length - back;
      const b = p[i]!;
      if ((b & 0xc0) === 0x80) continue; // continuation byte: keep looking for its lead
      const need = sequenceLength(b);
      return need > back ? i : p.length;
    }
    return p.length;
  }
}
