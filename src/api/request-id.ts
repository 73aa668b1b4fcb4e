// The request id: one per HTTP request, the key that joins a client's report, the request log line
// and the trace. A client's own `x-request-id` is kept when it is short and plain (a proxy or a
// gateway in front usually sets one); otherwise, or when absent, a fresh UUID replaces it.
// Every response carries it back as `x-request-id` (server.ts). It is not the completion's `id`
// (chatcmpl-…), which stays the response body's own.

import { randomUUID } from 'node:crypto';

export const REQUEST_ID_HEADER = 'x-request-id';
/** Longest id kept from a client; longer ones are replaced, not cut (a cut id would join nothing). */
export const MAX_REQUEST_ID_CHARS = 128;
/** What ids are made of: enough for UUIDs, ULIDs, hex, base64url and `prefix-...` schemes; nothing that could forge a log line. */
const REQUEST_ID = /^[A-Za-z0-9._:@/+=-]+$/;

/** The client's id when acceptable, else a fresh one. */
export function requestIdFrom(header: string | string[] | undefined): string {
  if (typeof header === 'string' && header.length <= MAX_REQUEST_ID_CHARS && REQUEST_ID.test(header)) return header;
  return randomUUID();
}
