// Cuts a byte stream of server-sent events at event boundaries (a blank line: `\n\n` or `\r\n\r\n`)
// without changing a byte: concatenated, what `push` returns plus `rest()` is exactly what came in.
// The gateway passes an upstream's stream on in whole events, so if the upstream dies part way, what
// the client has is whole events, and an error event can follow cleanly.
//
// O(chunk) per push: only the bytes after the last boundary are kept, and only the new chunk (plus
// three bytes before it, for a boundary split across chunks) is searched. What is kept is bounded
// by the caller (`pendingBytes` against its largest event): an upstream sending one endless event
// must not grow the gateway's memory with it.
//
// `checkEvents` is what the gateway accepts from an upstream: every event's data a JSON value or
// `[DONE]`, no event over the bound. Lines other than `data:` (event names, ids, `:` comments) are
// left alone, as the SSE spec says of fields it does not know.

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

  get pendingBytes(): number {
    return this.#pending.length;
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
    const data = eventData(block);
    if (data !== null) out.push(data);
  }
  return out;
}

/** One event's `data:` payload (its data lines joined by `\n`), or null when it has none. */
function eventData(event: string): string | null {
  const lines: string[] = [];
  for (const line of event.split(/\r?\n/)) {
    if (line.startsWith('data:')) lines.push(line.slice(line.startsWith('data: ') ? 6 : 5));
  }
  return lines.length === 0 ? null : lines.join('\n');
}

/** Whole events, checked in order: the leading ones that are fine (`ok`, a view of `events`) and why the next one is not (null: all are). */
export function checkEvents(events: Buffer, maxEventBytes: number): { readonly ok: Buffer; readonly problem: string | null } {
  let start = 0;
  while (start < events.length) {
    const end = nextBoundaryEnd(events, start);
    const problem = eventProblem(events.subarray(start, end), maxEventBytes);
    if (problem !== null) return { ok: events.subarray(0, start), problem };
    start = end;
  }
  return { ok: events, problem: null };
}

/** Offset just past the first `\n\n` or `\r\n\r\n` at or after `from` (the end of `b` if none). */
function nextBoundaryEnd(b: Buffer, from: number): number {
  for (let i = from + 1; i < b.length; i++) {
    if (b[i] !== LF) continue;
    if (b[i - 1] === LF) return i + 1;
    if (b[i - 1] === CR && i >= from + 3 && b[i - 2] === LF && b[i - 3] === CR) return i + 1;
  }
  return b.length;
}

/** Why one whole event is not what an OpenAI server streams (null: it is). */
function eventProblem(event: Buffer, maxEventBytes: number): string | null {
  if (event.length > maxEventBytes) return `an event of over ${maxEventBytes} bytes`;
  const data = eventData(event.toString('utf8'));
  if (data === null || data.trim() === '[DONE]') return null;
  try {
    JSON.parse(data);
    return null;
  } catch {
    return `an event whose data is not JSON: ${JSON.stringify(data.slice(0, 80))}`;
  }
}
