// CORS, off unless origins are given (`--cors-origin`, repeatable, or `*`): browsers on those
// origins may call the API. Preflight OPTIONS requests are answered (204) without an API key, as
// browsers send none on a preflight; the actual request still needs one. Responses expose
// `x-request-id` and `Retry-After` to scripts, so a browser client can report the one and honour
// the other. No credentials mode: API keys travel in the Authorization header, not in cookies.
//
// @fastify/cors sets its headers on the reply in an onRequest hook; streamed responses copy the
// reply's headers when they write their own (completions.ts), so streams carry them too.

import cors from '@fastify/cors';
import type { FastifyInstance } from 'fastify';

/** How long a browser may cache a preflight answer, seconds. */
const PREFLIGHT_MAX_AGE_S = 600;

export function registerCors(app: FastifyInstance, origins: readonly string[]): void {
  if (origins.length === 0) return;
  void app.register(cors, {
    origin: origins.includes('*') ? '*' : [...origins],
    methods: ['GET', 'HEAD', 'POST'],
    exposedHeaders: ['x-request-id', 'retry-after'],
    maxAge: PREFLIGHT_MAX_AGE_S,
    // A bare OPTIONS (no Origin) gets 204 too, instead of the plugin's plain-text 400.
    strictPreflight: false,
  });
}
