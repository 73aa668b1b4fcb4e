// One streaming chat-completion request, timed. Speaks plain OpenAI-compatible HTTP/SSE
// (`data: {...}` chunks, `data: [DONE]`, usage via stream_options.include_usage) so it works
// against Headroom, vLLM, SGLang or llama.cpp's server alike. It never imports engine code.
//
// Every latency is measured from `intendedMs`, not from the send. The response body is always
// consumed or destroyed in `finally`, so no socket stays half-read.
import { performance } from 'node:perf_hooks';
import type { Dispatcher } from 'undici';
import { createParser } from 'eventsource-parser';
import type { RequestSpec } from './workloads.ts';
import type { RequestRecord, LoopKind, Phase } from './record.ts';

export interface ClientOptions {
  /** Origin, e.g. http://127.0.0.1:8080. */
  readonly origin: string;
  /** Path of the chat-completions route. */
  readonly path: string;
  readonly model: string;
  /** Client gives up this long after the send; the row is then censored. */
  readonly timeoutMs: number;
  /** Sent as `x-slo-ms` when set. */
  readonly sloHeaderMs: number | null;
  /** Send ignore_eos: true (an extension Headroom and llama.cpp's server honour). */
  readonly ignoreEos: boolean;
  /** Extra headers on every request (credentials, routing); lower-case names. Default: none. */
  readonly headers?: Readonly<Record<string, string>>;
}

export interface RequestContext {
  readonly requestId: number;
  readonly loop: LoopKind;
  readonly worker: number | null;
  readonly phase: Phase;
  /** Intended arrival, ms from t0. */
  readonly intendedMs: number;
  /** performance.now() at the run's t0. */
  readonly t0: number;
  /** Aborting ends the request as a transport error (the run was stopped). */
  readonly signal?: AbortSignal;
}

/** Builds the JSON body once per request; kept separate so it can be tested and reused. */
export function requestBody(spec: RequestSpec, opts: ClientOptions): string {
  const body: Record<string, unknown> = {
    model: opts.model,
    messages: spec.messages,
    ...(spec.maxTokens === null ? {} : { max_tokens: spec.maxTokens }),
    stream: true,
    stream_options: { include_usage: true },
  };
  // A natural-length request ends at EOS whatever the run's ignore_eos says: that is its point.
  if (spec.sampling !== undefined) {
    body['temperature'] = spec.sampling.temperature;
    body['logit_bias'] = spec.sampling.logitBias;
    body['seed'] = spec.sampling.seed;
  } else if (opts.ignoreEos) body['ignore_eos'] = true;
  return JSON.stringify(body);
}

/** Sends one request through `dispatcher` and returns its record. Never throws for server behaviour. */
export async function sendRequest(
  dispatcher: Dispatcher,
  spec: RequestSpec,
  opts: ClientOptions,
  ctx: RequestContext,
): Promise<RequestRecord> {
  const body = requestBody(spec, opts);
  const headers: Record<string, string> = { ...opts.headers, 'content-type': 'application/json', accept: 'text/event-stream' };
  if (opts.sloHeaderMs !== null) headers['x-slo-ms'] = String(opts.sloHeaderMs);
  const ac = new AbortController();
  let timedOut = false;

  const now = (): number => performance.now() - ctx.t0;
  const sentMs = now();
  const timer = setTimeout(() => {
    timedOut = true;
    ac.abort();
  }, opts.timeoutMs);
  const stop = (): void => ac.abort();
  ctx.signal?.addEventListener('abort', stop, { once: true });
  if (ctx.signal?.aborted === true) ac.abort();

  const rec: RequestRecord = {
    request_id: ctx.requestId,
    loop: ctx.loop,
    worker: ctx.worker,
    klass: spec.klass,
    prefix_id: spec.prefixId,
    phase: ctx.phase,
    intended_ms: ctx.intendedMs,
    sent_ms: sentMs,
    slip_ms: sentMs - ctx.intendedMs,
    headers_ms: null,
    ttft_ms: null,
    e2e_ms: null,
    end_ms: sentMs,
    itl_ms: [],
    num_chunks: 0,
    prompt_tokens_est: spec.promptTokensEst,
    prompt_tokens: null,
    completion_tokens: null,
    max_tokens: spec.maxTokens,
    http_status: null,
    outcome: 'transport_error',
    shed_reason: null,
    retry_after_s: null,
    error: null,
    censored: false,
  };

  let res: Dispatcher.ResponseData | null = null;
  try {
    res = await dispatcher.request({ origin: opts.origin, path: opts.path, method: 'POST', headers, body, signal: ac.signal });
    rec.headers_ms = now();
    rec.http_status = res.statusCode;
    if (res.statusCode === 503 || res.statusCode === 429) {
      rec.outcome = 'shed';
      rec.retry_after_s = parseRetryAfter(res.headers['retry-after']);
      rec.shed_reason = shedReason(await res.body.text(), res.statusCode);
      return rec;
    }
    if (res.statusCode < 200 || res.statusCode >= 300) {
      rec.outcome = 'http_error';
      rec.error = (await res.body.text()).slice(0, 200);
      return rec;
    }
    await readStream(res.body, rec, now, ctx.intendedMs);
    return rec;
  } catch (err) {
    if (timedOut) {
      rec.outcome = 'timeout';
      rec.censored = true;
      rec.e2e_ms = null;
    } else {
      rec.outcome = 'transport_error';
      rec.error = err instanceof Error ? `${err.name}: ${err.message}`.slice(0, 200) : String(err);
    }
    return rec;
  } finally {
    clearTimeout(timer);
    ctx.signal?.removeEventListener('abort', stop);
    rec.end_ms = now();
    if (res !== null && !res.body.destroyed) res.body.destroy();
  }
}

async function readStream(
  body: AsyncIterable<Buffer>,
  rec: RequestRecord,
  now: () => number,
  intendedMs: number,
): Promise<void> {
  let lastChunkMs = -1;
  let done = false;
  let finished = false;
  let streamError: string | null = null;
  const parser = createParser({
    onEvent(ev) {
      if (ev.data === '[DONE]') {
        done = true;
        return;
      }
      const t = now();
      let msg: ChunkJson;
      try {
        msg = JSON.parse(ev.data) as ChunkJson;
      } catch {
        streamError = `unparseable SSE data: ${ev.data.slice(0, 80)}`;
        return;
      }
      if (msg.error !== undefined) {
        streamError = `stream error: ${JSON.stringify(msg.error).slice(0, 160)}`;
        return;
      }
      const choice = msg.choices?.[0];
      const text = choice?.delta?.content ?? choice?.text;
      if (typeof text === 'string' && text.length > 0) {
        if (lastChunkMs < 0) rec.ttft_ms = t - intendedMs;
        else rec.itl_ms.push(t - lastChunkMs);
        lastChunkMs = t;
        rec.num_chunks++;
      }
      if (choice?.finish_reason != null) finished = true;
      if (msg.usage != null) {
        if (typeof msg.usage.prompt_tokens === 'number') rec.prompt_tokens = msg.usage.prompt_tokens;
        if (typeof msg.usage.completion_tokens === 'number') rec.completion_tokens = msg.usage.completion_tokens;
      }
    },
  });
  const decoder = new TextDecoder();
  for await (const chunk of body) {
    parser.feed(decoder.decode(chunk, { stream: true }));
  }
  parser.feed(decoder.decode());
  if (streamError !== null) {
    rec.outcome = 'transport_error';
    rec.error = streamError;
  } else if (done || finished) {
    rec.outcome = 'ok';
    rec.e2e_ms = now() - intendedMs;
  } else {
    rec.outcome = 'transport_error';
    rec.error = 'stream ended without [DONE] or finish_reason';
  }
}

interface ChunkJson {
  choices?: Array<{ delta?: { content?: string | null }; text?: string; finish_reason?: string | null }>;
  usage?: { prompt_tokens?: number; completion_tokens?: number } | null;
  error?: unknown;
}

/** Retry-After as seconds: either delta-seconds or an HTTP date. */
export function parseRetryAfter(v: string | string[] | undefined): number | null {
  const s = Array.isArray(v) ? v[0] : v;
  if (s === undefined || s === '') return null;
  const n = Number(s);
  if (Number.isFinite(n)) return n;
  const t = Date.parse(s);
  return Number.isFinite(t) ? Math.max(0, (t - Date.now()) / 1000) : null;
}

function shedReason(bodyText: string, status: number): string {
  try {
    const j = JSON.parse(bodyText) as { error?: { code?: unknown; type?: unknown } };
    const code = j.error?.code ?? j.error?.type;
    if (typeof code === 'string' && code !== '') return code;
  } catch {
    // not JSON: fall through
  }
  return `http_${status}`;
}
