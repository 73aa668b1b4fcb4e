// Errors below the routes, in the OpenAI shape like every other error: malformed HTTP framing
// (400), headers past Node's size limit (431), a request not received within the header or
// request timeout (408). Node reports these as 'clientError' on the server with only the socket;
// we answer if nothing was sent on it yet, then close it. A reset connection is just closed.
import type { Socket } from 'node:net';
import { ApiError } from './errors.ts';

type ClientError = Error & { code?: string };

export function clientErrorResponse(err: ClientError): ApiError {
  switch (err.code) {
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return new ApiError('request_timeout', 'The request was not received in time; the connection is closed.');
    case 'HPE_HEADER_OVERFLOW':
      return new ApiError('headers_too_large', 'The request headers are larger than this server accepts.');
    default:
      return new ApiError('bad_request', `The request is not valid HTTP/1.1 (${err.code ?? 'parse error'}).`);
  }
}

/** Answer (or just close) a socket-level error; returns the error answered, null when none was. */
export function handleClientError(err: ClientError, socket: Socket): ApiError | null {
  if (err.code === 'ECONNRESET' || err.code === 'EPIPE' || socket.destroyed) {
    socket.destroy();
    return null;
  }
  // Node's own check: a response already under way on this socket cannot get another.
  const current = (socket as Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
  if (socket.writable && current?.headersSent !== true) {
    const e = clientErrorResponse(err);
    socket.end(e.toRawResponse());
    // end() flushes then closes; a peer that never reads must not hold the socket.
    setTimeout(() => socket.destroy(), 1000).unref();
    return e;
  }
  socket.destroy();
  return null;
}
