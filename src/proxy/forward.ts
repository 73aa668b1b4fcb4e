// One attempt to send a request to one upstream, up to the point where failing over stops being
// free: the first bytes the client would see.
//
//   event stream (200, text/event-stream)   settles once the first whole event has arrived; the rest
//                                           follows as whole events (sse-events.ts)
//   anything else (JSON, errors)            settles once the whole body has arrived (a completion
//                                           that is not streamed sends its body at the end anyway)
//
// Before that point a failure (connection refused, reset, timeout, a body cut short) is
// `unreachable`: nothing reached the client, another upstream may take the request. After it, a
// failure surfaces as an error thrown from the body iterator. Aborting the signal destroys the
// upstream connection, which is how the upstream learns that the client left.

import type { Dispatcher } from 'undici';
import { request } from 'undici';
import { SseEventSplitter } from './sse-events.ts';
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
  | { readonly kind: 'aborted' };

export interface AttemptRequest {
  readonly url: string;
  readonly body: Uint8Array;
  readonly headers: Readonly<Record<string, string>>;
}

/** Largest non-streamed body taken from an upstream. */
const MAX_WHOLE_BODY_BYTES = 64 << 20;

export async function attempt(req: AttemptRequest, dispatcher: Dispatcher, signal: AbortSignal): Promise<Attempt> {
  if (signal.aborted) return { kind: 'aborted' };
  let res: Dispatcher.ResponseData;
  try {
    res = await request(req.url, { method: 'POST', body: req.body, headers: req.headers, dispatcher, signal });
  } catch (err) {
    return signal.aborted ? { kind: 'aborted' } : { kind: 'unreachable', reason: describe(err) };
  }
  const contentType = headerString(res.headers['content-type']) ?? 'application/json';
  const iter = res.body[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
  const stream = res.statusCode === 200 && contentType.toLowerCase().startsWith('text/event-stream');
  try {
    if (!stream) {
      const parts: Buffer[] = [];
      let n = 0;
      for (let r = await iter.next(); r.done !== true; r = await iter.next()) {
        n += r.value.length;
        if (n > MAX_WHOLE_BODY_BYTES) {
          res.body.destroy();
          return { kind: 'unreachable', reason: `the upstream's body is over ${MAX_WHOLE_BODY_BYTES} bytes` };
        }
        parts.push(r.value);
      }
      return { kind: 'response', status: res.statusCode, contentType, first: Buffer.concat(parts), rest: null };
    }
    const splitter = new SseEventSplitter();
    for (;;) {
      const r = await iter.next();
      if (r.done === true) {
        // Ended before a whole event: pass on whatever it sent.
        return { kind: 'response', status: res.statusCode, contentType, first: splitter.rest(), rest: null };
      }
      const events = splitter.push(r.value);
      if (events.length > 0) return { kind: 'response', status: res.statusCode, contentType, first: Buffer.from(events), rest: restOf(iter, splitter) };
    }
  } catch (err) {
    res.body.destroy();
    return signal.aborted ? { kind: 'aborted' } : { kind: 'unreachable', reason: `the body failed before its first byte reached the client: ${describe(err)}` };
  }
}

/** The rest of an event stream, whole events at a time; a tail without a boundary is passed on when the upstream ends cleanly. */
async function* restOf(iter: AsyncIterator<Buffer>, splitter: SseEventSplitter): AsyncGenerator<Uint8Array> {
  try {
    for (let r = await iter.next(); r.done !== true; r = await iter.next()) {
      const events = splitter.push(r.value);
      if (events.length > 0) yield Buffer.from(events);
    }
    const tail = splitter.rest();
    if (tail.length > 0) yield tail;
  } finally {
    // Stopped early (the consumer returned or threw): close the upstream connection.
    await iter.return?.();
  }
}

function headerString(h: string | string[] | undefined): string | null {
  if (h === undefined) return null;
  return Array.isArray(h) ? (h[0] ?? null) : h;
}
