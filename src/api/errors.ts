// The one catalog of errors a client can see. Every refusal and failure the API returns is built
// here, so a code always maps to the same HTTP status and OpenAI error type. The codes themselves
// are named at the bottom (util/request-error.ts), where the layers under the API raise a
// RequestError with one; this file is their HTTP mapping.
//
// Wire shape (what openai-node and every OpenAI client parse):
//   {"error": {"message": "...", "type": "invalid_request_error", "param": "max_tokens", "code": "invalid_value"}}
// Refusals (429/503) also carry a Retry-After header in whole seconds.

import type { ErrorCode } from '../util/request-error.ts';
import { RequestError } from '../util/request-error.ts';

export type { ErrorCode } from '../util/request-error.ts';

export type ErrorType = 'invalid_request_error' | 'not_found_error' | 'rate_limit_error' | 'overloaded_error' | 'server_error';

interface CatalogEntry {
  readonly status: number;
  readonly type: ErrorType;
}

/** Each stable error code's HTTP status and OpenAI error type (every code has one: `satisfies`). */
export const ERROR_CATALOG = {
  bad_request: { status: 400, type: 'invalid_request_error' },
  invalid_json: { status: 400, type: 'invalid_request_error' },
  invalid_encoding: { status: 400, type: 'invalid_request_error' },
  invalid_value: { status: 400, type: 'invalid_request_error' },
  missing_field: { status: 400, type: 'invalid_request_error' },
  unsupported_value: { status: 400, type: 'invalid_request_error' },
  context_length_exceeded: { status: 400, type: 'invalid_request_error' },
  invalid_api_key: { status: 401, type: 'invalid_request_error' },
  permission_denied: { status: 403, type: 'invalid_request_error' },
  model_not_found: { status: 404, type: 'not_found_error' },
  route_not_found: { status: 404, type: 'not_found_error' },
  method_not_allowed: { status: 405, type: 'invalid_request_error' },
  request_timeout: { status: 408, type: 'invalid_request_error' },
  body_too_large: { status: 413, type: 'invalid_request_error' },
  unsupported_media_type: { status: 415, type: 'invalid_request_error' },
  rate_limited: { status: 429, type: 'rate_limit_error' },
  headers_too_large: { status: 431, type: 'invalid_request_error' },
  capacity: { status: 503, type: 'overloaded_error' },
  draining: { status: 503, type: 'overloaded_error' },
  loading: { status: 503, type: 'overloaded_error' },
  too_many_connections: { status: 503, type: 'overloaded_error' },
  slo_unattainable: { status: 503, type: 'overloaded_error' },
  engine_unavailable: { status: 503, type: 'overloaded_error' },
  engine_failure: { status: 500, type: 'server_error' },
  internal_error: { status: 500, type: 'server_error' },
} as const satisfies Record<ErrorCode, CatalogEntry>;

const STATUS_TEXT: Readonly<Record<number, string>> = { 400: 'Bad Request', 408: 'Request Timeout', 413: 'Payload Too Large', 431: 'Request Header Fields Too Large', 503: 'Service Unavailable' };

/** A failure meant for the client, with its HTTP rendering. Thrown inside handlers; rendered by the one error handler in server.ts. */
export class ApiError extends RequestError {
  constructor(code: ErrorCode, message: string, opts: { param?: string | null; retryAfterS?: number | null } = {}) {
    super(code, message, opts);
    this.name = 'ApiError';
  }

  /** A RequestError raised below the API (flow/, obs/), as the client will see it: the same code, message, param and Retry-After. */
  static of(e: RequestError): ApiError {
    return e instanceof ApiError ? e : new ApiError(e.code, e.message, { param: e.param, retryAfterS: e.retryAfterS });
  }

  get status(): number {
    return ERROR_CATALOG[this.code].status;
  }

  /** A whole HTTP/1.1 response that closes the connection, for places with only a socket (http-errors.ts, connections.ts). */
  toRawResponse(): string {
    const body = JSON.stringify(this.toBody());
    const retry = this.retryAfterS === null ? '' : `Retry-After: ${this.retryAfterS}\r\n`;
    return `HTTP/1.1 ${this.status} ${STATUS_TEXT[this.status] ?? 'Error'}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\n${retry}Connection: close\r\n\r\n${body}`;
  }

  toBody(): { error: { message: string; type: ErrorType; param: string | null; code: ErrorCode } } {
    return { error: { message: this.message, type: ERROR_CATALOG[this.code].type, param: this.param, code: this.code } };
  }
}
