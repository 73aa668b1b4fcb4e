// An API surface: how one endpoint's body becomes a chat or completion request for the one
// generation path (completions.ts), and how that path's output is framed for the endpoint.
// Chat and completions frame with Framer; the Responses API is parsed into a chat request and
// framed by its own (responses.ts). Flow control, admission, aborts and stop strings are the same
// code for all of them.

import type { ApiError } from './errors.ts';
import { Framer } from './framer.ts';
import type { Framing } from './framer.ts';
import type { SizeFacts } from './limits.ts';
import type { Kind, Parsed, Prepared } from './prepare.ts';
import { parse } from './prepare.ts';

/** One request as the surface parsed it. */
export interface SurfaceRequest {
  /** What the generation path prepares: a chat or completion request. */
  readonly parsed: Parsed;
  /** An error from preparing, with its `param` named as this surface's client sent it. */
  renameError(e: ApiError): ApiError;
  framing(id: string, createdS: number, prepared: Prepared): Framing;
}

export interface Surface {
  /** Response ids: `<prefix>-<random>`. */
  readonly idPrefix: string;
  /** Validate and convert, or throw the 400 naming the offending field. */
  /** `models`: the names the server answers to. */
  parse(raw: unknown, models: readonly string[], size: SizeFacts): SurfaceRequest;
}

function openAiSurface(kind: Kind, idPrefix: string): Surface {
  return {
    idPrefix,
    parse: (raw, models, size) => ({
      parsed: parse(kind, raw, models, size),
      renameError: (e) => e,
      framing: (id, createdS, p) => new Framer(kind, id, createdS, p.model, p.includeUsage),
    }),
  };
}

export const chatSurface: Surface = openAiSurface('chat', 'chatcmpl');
export const completionSurface: Surface = openAiSurface('completion', 'cmpl');
