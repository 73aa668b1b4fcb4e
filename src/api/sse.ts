// Server-sent events on a raw Node response: `data: <json>\n\n` frames (with an `event:` line when
// named), `data: [DONE]` at the end of chat and completion streams.
// The writer never throws on a closed socket: a client that left just stops receiving.
// It never sets a Connection header: node answers keep-alive or close from the request (a client
// that sent `Connection: close`, or HTTP/1.0 without keep-alive, gets `close`); an explicit
// `keep-alive` here used to override the client's `close`.

import type { ServerResponse } from 'node:http';

const uncork = (res: ServerResponse): void => {
  if (res.writableCorked > 0) res.uncork();
};

export class SseWriter {
  readonly #res: ServerResponse;

  constructor(res: ServerResponse) {
    this.#res = res;
  }

  /**
   * The status line and headers. `flush` (the default) sends them now, so a client sees the stream
   * open before the first token; without it they go out with the first frame, in the same write
   * (a proxy that already holds its first upstream bytes saves a system call and a packet).
   */
  open(extraHeaders: Record<string, string> = {}, flush = true): void {
    this.#res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      'x-accel-buffering': 'no',
      ...extraHeaders,
    });
    if (flush) this.#res.flushHeaders();
  }

  /**
   * Raw bytes, already framed (a proxied stream). Everything written before the event loop's check
   * phase leaves in one write: the response is corked until then (`setImmediate`). An upstream
   * whose whole stream came in one read (a short answer) is read to its end in that time, so its
   * events and the response's end go out in one system call; uncorked at the next tick, as this
   * once was, the end took a write of its own (three writes a request through the gateway instead
   * of two, measured with strace). The first bytes wait for the rest of the loop's current phase.
   */
  raw(chunk: Uint8Array): void {
    if (this.closed) return;
    const res = this.#res;
    if (res.writableCorked === 0) {
      res.cork();
      setImmediate(uncork, res);
    }
    res.write(chunk);
  }

  get closed(): boolean {
    return this.#res.destroyed || this.#res.writableEnded;
  }

  /** A `data:` frame, preceded by an `event:` line when named (the Responses API names every event). */
  send(payload: unknown, event?: string): void {
    if (this.closed) return;
    this.#res.write(event === undefined ? `data: ${JSON.stringify(payload)}\n\n` : `event: ${event}\ndata: ${JSON.stringify(payload)}\n\n`);
  }

  /** `data: [DONE]` and end the response; safe to call twice. */
  done(): void {
    if (this.closed) return;
    this.#res.write('data: [DONE]\n\n');
    this.#res.end();
  }

  /** End without [DONE] (the client is gone or the server is failing). */
  end(): void {
    if (!this.closed) this.#res.end();
  }
}
