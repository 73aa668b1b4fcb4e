// One attempt to send a request to one upstream, up to the point where failing over stops being
// free: the first bytes the client would see. The upstream is not trusted to answer as an OpenAI
// server does; what it sends is checked before it can reach the client.
//
//   event stream (2xx, text/event-stream)   settles once the first whole event has arrived; the rest
//                                           follows as whole events (sse-events.ts), each checked
//   JSON (2xx, application/json)            settles once the whole body has arrived (a completion
//                                           that is not streamed sends its body at the end anyway)
//   an error status                         the same; a body that is not JSON (a proxy's HTML page)
//                                           is replaced by an OpenAI error saying what came
//
// Before that point:
//   unreachable  connection refused, reset, a body cut short: nothing reached the client, another
//                upstream may take the request, and this one is ejected (it cannot be reached).
//   bad          the upstream answered what no OpenAI server sends: a 2xx that is neither JSON nor
//                an event stream (HTML), an event whose data is not JSON, an event over
//                `maxEventBytes`, a body over MAX_WHOLE_BODY_BYTES; or it stalled (`stall`): no
//                headers and first event within `firstByteTimeoutMs` (a stream), no headers within
//                `headersTimeoutMs` (anything else: a whole completion is generated before its
//                headers), or `idleTimeoutMs` without a byte. Another upstream may take it; this
//                one's error is counted (pool.ts).
// After it, a failure surfaces as an error thrown from the body iterator: `UpstreamMisbehaved`
// for a bad event or a stall, anything else for a connection that died. Aborting the signal
// destroys the upstream connection, which is how the upstream learns that the client left.

import type { Dispatcher } from 'undici';
import { request } from 'undici';
import { SseEventSplitter, checkEvents } from './sse-events.ts';
import { describe } from './pool.ts';

export type Attempt =
  | {
      readonly kind: 'response';
      readonly status: number;
      readonly contentType: string;
      /** The whole body (not a stream), or the first whole events (a stream). */
      readonly first: Buffer;
      /** The rest of an event stream (null: nothing more, the body was read whole). */
      readonly rest: AsyncIterable<Uint8Array> | null;
    }
  | { readonly kind: 'unreachable'; readonly reason: string }
  | { readonly kind: 'bad'; readonly reason: string; readonly stall: boolean }
  | { readonly kind: 'aborted' };

export interface AttemptRequest {
  readonly url: string;
  readonly body: Uint8Array;
  readonly headers: Readonly<Record<string, string>>;
  /** The client asked for a stream: its first event is due within `firstByteTimeoutMs`. */
  readonly stream: boolean;
}

export interface AttemptLimits {
  /** A stream's headers and first whole event arrive within this, from the request. */
  readonly firstByteTimeoutMs: number;
  /** Anything else's headers arrive within this. */
  readonly headersTimeoutMs: number;
  /** Longest silence inside a body, once its headers are in. */
  readonly idleTimeoutMs: number;
  /** Largest single event of a stream. */
  readonly maxEventBytes: number;
}

/** What went wrong with an upstream's stream after its first byte reached the client. */
export class UpstreamMisbehaved extends Error {
  constructor(message: string, readonly stall: boolean) {
    super(message);
    this.name = 'UpstreamMisbehaved';
  }
}

/** Largest non-streamed body taken from an upstream (an embeddings answer for a large batch is tens of MB). */
const MAX_WHOLE_BODY_BYTES = 64 << 20;
/** undici's codes for its header and body timeouts: a stall, not an unreachable upstream. */
const STALL_CODES = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT']);

export async function attempt(req: AttemptRequest, limits: AttemptLimits, dispatcher: Dispatcher, signal: AbortSignal): Promise<Attempt> {
  if (signal.aborted) return { kind: 'aborted' };
  // A stream's first-byte deadline covers the headers and the first event together: an upstream
  // that sends headers at once and then nothing is as stuck as one that sends nothing.
  const deadline = new AbortController();
  const timer = req.stream ? setTimeout(() => deadline.abort(), limits.firstByteTimeoutMs) : null;
  const stalled = (): Attempt => ({ kind: 'bad', reason: `stalled: no first event within ${limits.firstByteTimeoutMs} ms`, stall: true });
  const failed = (err: unknown, before: string): Attempt => {
    if (signal.aborted) return { kind: 'aborted' };
    if (deadline.signal.aborted) return stalled();
    if (isStall(err)) return { kind: 'bad', reason: `stalled: ${describe(err)}`, stall: true };
    return { kind: 'unreachable', reason: `${before}${describe(err)}` };
  };
  try {
    let res: Dispatcher.ResponseData;
    try {
      res = await request(req.url, {
        method: 'POST',
        body: req.body,
        headers: req.headers,
        dispatcher,
        signal: timer === null ? signal : AbortSignal.any([signal, deadline.signal]),
        headersTimeout: req.stream ? limits.firstByteTimeoutMs : limits.headersTimeoutMs,
        bodyTimeout: limits.idleTimeoutMs,
      });
    } catch (err) {
      return failed(err, '');
    }
    const contentType = headerString(res.headers['content-type']) ?? 'application/json';
    const type = contentType.toLowerCase();
    const ok = res.statusCode >= 200 && res.statusCode < 300;
    const iter = res.body[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
    const stream = ok && type.startsWith('text/event-stream');
    if (ok && !stream && !isJson(type)) {
      discard(res.body);
      return { kind: 'bad', reason: `answered ${res.statusCode} with ${contentType}, neither JSON nor an event stream`, stall: false };
    }
    try {
      if (!stream) {
        const body = await wholeBody(iter);
        if (body === null) {
          discard(res.body);
          return { kind: 'bad', reason: `a body over ${MAX_WHOLE_BODY_BYTES} bytes`, stall: false };
        }
        if (ok && !looksLikeJson(body)) return { kind: 'bad', reason: `answered ${res.statusCode} with a body that is not JSON`, stall: false };
        if (!ok && !isJson(type)) return { kind: 'response', status: res.statusCode, contentType: 'application/json', first: asOpenAiError(res.statusCode, contentType, body), rest: null };
        return { kind: 'response', status: res.statusCode, contentType, first: body, rest: null };
      }
      const splitter = new SseEventSplitter();
      for (;;) {
        const r = await iter.next();
        if (r.done === true) {
          // Ended before a whole event: pass on whatever it sent (the client's stream ends with an error event).
          return { kind: 'response', status: res.statusCode, contentType, first: splitter.rest(), rest: null };
        }
        const events = splitter.push(r.value);
        if (splitter.pendingBytes > limits.maxEventBytes) {
          discard(res.body);
          return { kind: 'bad', reason: `an event of over ${limits.maxEventBytes} bytes`, stall: false };
        }
        if (events.length === 0) continue;
        const checked = checkEvents(events, limits.maxEventBytes);
        if (checked.ok.length === 0) {
          discard(res.body);
          return { kind: 'bad', reason: checked.problem!, stall: false };
        }
        // The events before a bad one still go out; the bad one ends the stream after them.
        const rest = checked.problem === null ? restOf(iter, splitter, limits) : failing(iter, new UpstreamMisbehaved(checked.problem, false));
        return { kind: 'response', status: res.statusCode, contentType, first: Buffer.from(checked.ok), rest };
      }
    } catch (err) {
      discard(res.body);
      return failed(err, 'the body failed before its first byte reached the client: ');
    }
  } finally {
    if (timer !== null) clearTimeout(timer);
  }
}

/** The rest of an event stream, whole checked events at a time; a tail without a boundary is passed on when the upstream ends cleanly. */
async function* restOf(iter: AsyncIterator<Buffer>, splitter: SseEventSplitter, limits: AttemptLimits): AsyncGenerator<Uint8Array> {
  try {
    for (;;) {
      let r: IteratorResult<Buffer>;
      try {
        r = await iter.next();
      } catch (err) {
        throw isStall(err) ? new UpstreamMisbehaved(`stalled: nothing for ${limits.idleTimeoutMs} ms`, true) : err;
      }
      if (r.done === true) break;
      const events = splitter.push(r.value);
      if (splitter.pendingBytes > limits.maxEventBytes) throw new UpstreamMisbehaved(`an event of over ${limits.maxEventBytes} bytes`, false);
      if (events.length === 0) continue;
      const checked = checkEvents(events, limits.maxEventBytes);
      if (checked.ok.length > 0) yield Buffer.from(checked.ok);
      if (checked.problem !== null) throw new UpstreamMisbehaved(checked.problem, false);
    }
    const tail = splitter.rest();
    if (tail.length > 0) yield tail;
  } finally {
    // Stopped early (the consumer returned or threw, or the upstream misbehaved): close the upstream connection.
    await iter.return?.();
  }
}

/** A stream whose next event was bad: it throws at once, and closes the upstream connection. */
async function* failing(iter: AsyncIterator<Buffer>, err: Error): AsyncGenerator<Uint8Array> {
  try {
    yield* [];
    throw err;
  } finally {
    await iter.return?.();
  }
}

/** The whole body, or null once it passes MAX_WHOLE_BODY_BYTES. */
async function wholeBody(iter: AsyncIterator<Buffer>): Promise<Buffer | null> {
  const parts: Buffer[] = [];
  let n = 0;
  for (let r = await iter.next(); r.done !== true; r = await iter.next()) {
    n += r.value.length;
    if (n > MAX_WHOLE_BODY_BYTES) return null;
    parts.push(r.value);
  }
  return Buffer.concat(parts);
}

/** An upstream's error answer that is not JSON, as the OpenAI error a client can parse. */
function asOpenAiError(status: number, contentType: string, body: Buffer): Buffer {
  const text = body.subarray(0, 200).toString('utf8').replace(/\s+/g, ' ').trim();
  const type = status >= 500 ? 'server_error' : status === 404 ? 'not_found_error' : 'invalid_request_error';
  return Buffer.from(JSON.stringify({ error: { message: `The upstream answered ${status} with ${contentType}: ${text}`, type, param: null, code: null } }));
}

/** Close an upstream body not read to its end (undici reports that as an error: nobody is left to hear it). */
function discard(body: Dispatcher.ResponseData['body']): void {
  body.on('error', () => undefined);
  body.destroy();
}

function isStall(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && STALL_CODES.has(code);
}

function isJson(type: string): boolean {
  const base = type.split(';')[0]!.trim();
  return base === 'application/json' || base.endsWith('+json');
}

/** A JSON object or array (what every OpenAI answer is); a full parse is left to whoever reads it. */
function looksLikeJson(body: Buffer): boolean {
  for (const b of body) {
    if (b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09) continue;
    return b === 0x7b || b === 0x5b;
  }
  return false;
}

function headerString(h: string | string[] | undefined): string | null {
  if (h === undefined) return null;
  return Array.isArray(h) ? (h[0] ?? null) : h;
}
