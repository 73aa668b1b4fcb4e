// What one burst connection ended with, read from the raw bytes it received. A raw reader (not an
// HTTP client library) so that 5,000 connections per process cost a socket and a buffer each, and so
// that what the server did at the TCP level (closed without answering, reset) stays visible instead
// of being retried or folded into one generic error.
//
// Kinds (the keys of a burst report's `outcomes`):
//   ok                      200 stream ended with `data: [DONE]` and no error event
//   stream_error            200 stream carrying an error event
//   truncated               200 stream cut before `[DONE]`
//   429 <flow reason>       flow control: queue_full, queue_ttl, client_left, too_large or other
//   <status> <error code>   any other HTTP answer, e.g. `503 too_many_connections`, `503 slo_unattainable`
//   closed                  the server closed the connection without a byte of answer (FIN)
//   reset                   the connection was reset (RST, EPIPE) before a byte of answer
//   refused                 ECONNREFUSED: nothing accepted the connection
//   timeout                 no complete answer within the client's deadline
//   error <code>            any other socket error before an answer

/** The kind of a finished connection: `bytes` received, `error` the socket error code if any. */
export function classify(bytes: Buffer, errorCode: string | null, timedOut: boolean): string {
  const text = bytes.toString('latin1');
  const status = /^HTTP\/1\.[01] (\d{3})/.exec(text);
  if (status === null) {
    if (timedOut) return 'timeout';
    if (errorCode === null) return 'closed';
    if (errorCode === 'ECONNRESET' || errorCode === 'EPIPE') return 'reset';
    if (errorCode === 'ECONNREFUSED') return 'refused';
    return `error ${errorCode}`;
  }
  const code = Number(status[1]);
  const headerEnd = text.indexOf('\r\n\r\n');
  const body = headerEnd < 0 ? '' : text.slice(headerEnd + 4);
  if (code === 200) {
    if (/^data: \{"error"/m.test(body)) return 'stream_error';
    if (body.includes('data: [DONE]')) return 'ok';
    return timedOut ? 'timeout' : 'truncated';
  }
  if (code === 429) return `429 ${flowReason(body)}`;
  const errCode = /"code":"([a-z_]+)"/.exec(body);
  return `${code} ${errCode === null ? 'unknown' : errCode[1]}`;
}

/** The flow-control reason of a 429, from its message (src/flow/flow-controller.ts words them). */
function flowReason(body: string): string {
  if (body.includes('the wait queue is full')) return 'queue_full';
  if (body.includes('for a slot (--flow-queue-ttl-ms)')) return 'queue_ttl';
  if (body.includes('The client left')) return 'client_left';
  if (body.includes('it can never be served here')) return 'too_large';
  return 'other';
}
