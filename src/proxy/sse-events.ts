// Cuts a byte stream of server-sent events at event boundaries (a blank line: `\n\n` or `\r\n\r\n`)
// without changing a byte: concatenated, what `push` returns plus `rest()` is exactly what came in.
// The gateway passes an upstream's stream on in whole events, so if the upstream dies part way, what
// the client has is whole events, and an error event can follow cleanly.
//
// O(chunk) per push: only the bytes after the last boundary are kept, and only the new chunk (plus
// three bytes before it, for a boundary split across chunks) is searched.

const LF = 0x0a;
const CR = 0x0d;

export class SseEventSplitter {
  #pending: Buffer = Buffer.alloc(0);

  /** Whole events completed by `chunk` (possibly several, possibly none: an empty buffer). */
  push(chunk: Uint8Array): Buffer {
    const searchFrom = Math.max(0, this.#pending.length - 3);
    const all = this.#pending.length === 0 ? Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength) : Buffer.concat([this.#pending, chunk]);
    const end = lastBoundaryEnd(all, searchFrom);
    if (end === 0) {
      this.#pending = Buffer.from(all);
      return Buffer.alloc(0);
    }
    this.#pending = Buffer.from(all.subarray(end));
    return all.subarray(0, end);
  }

  /** Bytes of an event not yet ended. */
  rest(): Buffer {
    return this.#pending;
  }
}

/** Offset just past the last `\n\n` or `\r\n\r\n` that ends at or after `from`, or 0. */
function lastBoundaryEnd(b: Buffer, from: number): number {
  for (let i = b.length - 1; i >= from + 1; i--) {
    if (b[i] !== LF) continue;
    if (b[i - 1] === LF) return i + 1;
    if (b[i - 1] === CR && i >= 3 && b[i - 2] === LF && b[i - 3] === CR) return i + 1;
  }
  return 0;
}

/** The `data:` payloads of whole events, in order (multi-line data joined by `\n`, as the SSE spec says). */
export function dataPayloads(events: Buffer): string[] {
  const out: string[] = [];
  for (const block of events.toString('utf8').split(/\r?\n\r?\n/)) {
    const lines: string[] = [];
    for (const line of block.split(/\r?\n/)) {
      if (line.startsWith('data:')) lines.push(line.slice(line.startsWith('data: ') ? 6 : 5));
    }
    if (lines.length > 0) out.push(lines.join('\n'));
  }
  return out;
}
