// What a client can be told, named below the API: the stable error codes (`ErrorCode`) and
// `RequestError`, the failure a layer under the API raises for one request — a malformed
// `x-headroom-priority` header or a request larger than flow control ever admits (flow/), a
// dashboard run that does not exist (obs/). The HTTP side of a code — its status, its OpenAI error
// type, the JSON body, Retry-After — is the API's: the catalog in api/errors.ts, and the one error
// handler in api/server.ts, which turns a RequestError into an ApiError with the same code,
// message, param and Retry-After.
//
// The codes live here, at the bottom, so that the refusal vocabulary (backend/refusal.ts) and the
// layers under the API can name them without importing the API (docs/architecture.md, "Layers").
// Adding a code is an API change (clients branch on them); the catalog must map it, or tsc fails.

/** Stable error codes, as the `code` of OpenAI's error JSON. */
export type ErrorCode =
  | 'bad_request'
  | 'invalid_json'
  | 'invalid_encoding'
  | 'invalid_value'
  | 'missing_field'
  | 'unsupported_value'
  | 'context_length_exceeded'
  | 'invalid_api_key'
  | 'permission_denied'
  | 'model_not_found'
  | 'route_not_found'
  | 'method_not_allowed'
  | 'request_timeout'
  | 'body_too_large'
  | 'unsupported_media_type'
  | 'rate_limited'
  | 'headers_too_large'
  | 'capacity'
  | 'draining'
  | 'loading'
  | 'too_many_connections'
  | 'slo_unattainable'
  | 'engine_unavailable'
  | 'engine_failure'
  | 'internal_error';

/** A failure meant for the client, raised below the API; api/server.ts renders it. */
export class RequestError extends Error {
  readonly code: ErrorCode;
  /** The request field or header at fault (OpenAI's `param`); null: none in particular. */
  readonly param: string | null;
  /** Seconds, for 429/503 refusals; null: no Retry-After. */
  readonly retryAfterS: number | null;

  constructor(code: ErrorCode, message: string, opts: { param?: string | null; retryAfterS?: number | null } = {}) {
    super(message);
    this.name = 'RequestError';
    this.code = code;
    this.param = opts.param ?? null;
    this.retryAfterS = opts.retryAfterS ?? null;
  }
}
