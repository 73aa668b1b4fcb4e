// Gateway mode's backend: the upstream pool behind the API's `ForwardingBackend` seam.
//
// Why forwarding, not `generate`. Engine mode's Backend yields token ids that the API detokenizes
// and frames. An upstream (vLLM, SGLang, llama-server, another Headroom) returns text already
// framed as OpenAI JSON or SSE, in its own tokenizer's terms, which the gateway does not have. So
// the seam in gateway mode is a capability of its own: the API still does what it does for every
// request (auth, validation of the envelope, flow control, the error catalog, request logs,
// metrics, the drain), then hands the client's body, byte for byte, to `forward`, and pipes the
// upstream's bytes back unchanged. Re-framing upstream text as tokens would change what clients
// receive and cost a parse per token for nothing.
//
// What `forward` does:
//   1. refuse at once while draining;
//   2. pick a healthy upstream serving the request's model (picker.ts), count it in flight there,
//      remember the prompt in its affinity trie;
//   3. send it (forward.ts). Connection refused / reset before the first response byte: eject the
//      upstream (pool.ts) and try another. An answer no OpenAI server sends (HTML, a malformed or
//      oversized event) or a stall: count the upstream's error (degraded past a threshold; a stall
//      at once) and try another. 429, 502, 503, 504, and 404, 405, 501 (this upstream does not
//      serve the route or the model: an embeddings request to a generation server): try another,
//      and pass the last such answer through if none is better. Any other status (a 4xx the
//      upstream found in the request, a 200) goes to the client unchanged;
//   4. no upstream left: refuse with `no_upstream` (503 + Retry-After), saying what the last one did.
// After the first byte, an upstream's bad event or stall is counted the same way, and thrown to the
// API, which ends the client's stream with an error event.
// The in-flight count is released exactly once: when the response body ends however it ends, or
// when the client leaves.
//
// Invariant: nothing reaches the client before `forward` settles, so every failover is invisible.

import { Agent } from 'undici';
import type { BackendHealth, BackendInfo, ForwardRequest, ForwardResponse, ForwardResult, ForwardingBackend, Placement } from '../backend/backend.ts';
import { refusal } from '../backend/refusal.ts';
import type { Clock } from '../engine/clock.ts';
import { UpstreamMisbehaved, attempt } from './forward.ts';
import type { AttemptLimits } from './forward.ts';
import { DEFAULT_FIRST_BYTE_TIMEOUT_MS, DEFAULT_IDLE_TIMEOUT_MS, DEFAULT_MAX_EVENT_BYTES } from './upstream-limits.ts';
import { GatewayBooks, LearnedPromptSizer } from './gateway-load.ts';
import type { Picker } from './picker.ts';
import type { UpstreamPool } from './pool.ts';
import type { Upstream } from './upstream.ts';
import { NO_UPSTREAM_ACCESS, connectOptions } from './upstream-access.ts';
import type { UpstreamAccess } from './upstream-access.ts';

export interface ProxyOptions {
  /** Most upstreams one request is tried on. */
  readonly maxAttempts: number;
  readonly connectTimeoutMs: number;
  /** Longest wait for the headers of an answer that is not streamed (it is generated whole first). */
  readonly upstreamTimeoutMs: number;
  /** Longest wait for a stream's headers and first event (default DEFAULT_FIRST_BYTE_TIMEOUT_MS). */
  readonly firstByteTimeoutMs?: number;
  /** Longest silence inside an upstream's body once its headers are in (default DEFAULT_IDLE_TIMEOUT_MS). */
  readonly idleTimeoutMs?: number;
  /** Largest single event of an upstream's stream (default DEFAULT_MAX_EVENT_BYTES). */
  readonly maxEventBytes?: number;
  /** Retry-After of a `no_upstream` refusal, seconds. */
  readonly retryAfterS: number;
  /** Credentials and TLS for the upstreams (default: none, the system's CAs). */
  readonly access?: UpstreamAccess;
}

/** Statuses that say "not now, not here" or "not served here": another upstream may do better. */
const RETRY_ELSEWHERE = new Set([404, 405, 429, 501, 502, 503, 504]);


/** Context length reported when no upstream says (the gateway checks no prompt size itself). */
const UNKNOWN_CONTEXT = 0;

export class ProxyBackend implements ForwardingBackend {
  readonly clock: Clock;
  readonly pool: UpstreamPool;
  readonly sizer = new LearnedPromptSizer();
  /** Each upstream's books, by index. */
  readonly books: readonly GatewayBooks[];
  readonly #picker: Picker;
  readonly #opts: ProxyOptions;
  readonly #agent: Agent;
  readonly #limits: AttemptLimits;
  #draining = false;
  #numInFlight = 0;
  #numFailovers = 0;
  #numNoUpstream = 0;
  #idleWaiters: (() => void)[] = [];

  constructor(pool: UpstreamPool, picker: Picker, clock: Clock, opts: ProxyOptions) {
    if (!Number.isInteger(opts.maxAttempts) || opts.maxAttempts < 1) throw new Error(`ProxyBackend: expected maxAttempts to be an integer ≥ 1, got ${opts.maxAttempts}`);
    this.#limits = {
      firstByteTimeoutMs: opts.firstByteTimeoutMs ?? DEFAULT_FIRST_BYTE_TIMEOUT_MS,
      headersTimeoutMs: opts.upstreamTimeoutMs,
      idleTimeoutMs: opts.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS,
      maxEventBytes: opts.maxEventBytes ?? DEFAULT_MAX_EVENT_BYTES,
    };
    for (const [k, v] of Object.entries(this.#limits)) {
      if (!Number.isInteger(v) || v < 1) throw new Error(`ProxyBackend: expected ${k === 'headersTimeoutMs' ? 'upstreamTimeoutMs' : k} to be a positive integer, got ${v}`);
    }
    this.pool = pool;
    this.books = pool.upstreams.map((u) => new GatewayBooks(() => clock.nowMs(), pool.factsOf(u)));
    this.#picker = picker;
    this.clock = clock;
    this.#opts = opts;
    const access = opts.access ?? NO_UPSTREAM_ACCESS;
    this.#agent = new Agent({ connect: connectOptions(access, opts.connectTimeoutMs), headersTimeout: opts.upstreamTimeoutMs, bodyTimeout: opts.upstreamTimeoutMs, keepAliveTimeout: 10_000 });
  }

  get info(): BackendInfo {
    const models = this.models();
    const ctx = this.pool.upstreams.map((u) => u.contextTokens).filter((n): n is number => n !== null);
    return { mode: 'gateway', modelId: models[0] ?? '', contextTokens: ctx.length > 0 ? Math.min(...ctx) : UNKNOWN_CONTEXT };
  }

  /**
   * The models the upstreams have said they serve, in upstream order (the first is the canonical
   * one, in metrics). Ejected upstreams' models stay: a request for one gets 503 no_upstream
   * (retry later), not 404 (a model that does not exist).
   */
  models(): readonly string[] {
    const seen = new Set<string>();
    for (const u of this.pool.upstreams) for (const m of u.models) seen.add(m);
    return [...seen];
  }

  health(): BackendHealth {
    return { ok: true, draining: this.#draining, failure: null, serving: this.pool.healthy().length > 0 };
  }

  get numInFlight(): number {
    return this.#numInFlight;
  }

  get numFailovers(): number {
    return this.#numFailovers;
  }

  stats(): Record<string, unknown> {
    return { gateway: { numInFlight: this.#numInFlight, numFailovers: this.#numFailovers, numNoUpstream: this.#numNoUpstream, bytesPerToken: Math.round(this.sizer.bytesPerToken * 100) / 100, upstreams: this.pool.snapshot().map((u, i) => ({ ...u, books: this.books[i]!.state() })) } };
  }

  /** Refuse new requests from now on; in-flight ones go on. */
  startDrain(): void {
    this.#draining = true;
  }

  /** Resolves once no forwarded response is in flight. */
  whenIdle(): Promise<void> {
    if (this.#numInFlight === 0) return Promise.resolve();
    return new Promise((r) => this.#idleWaiters.push(r));
  }

  placements(model: string, affinityKey: readonly number[]): Placement[] {
    const p = this.#picker.pick(this.#candidates(model, new Set()), affinityKey, this.pool);
    if (p.upstream === null) return [];
    const rest = p.scores.filter((s) => s.upstream !== p.upstream!.index).sort((a, b) => Number(a.saturated) - Number(b.saturated) || b.total - a.total);
    return [p.upstream.index, ...rest.map((s) => s.upstream)].map((i) => ({ upstream: i, books: this.books[i]! }));
  }

  #candidates(model: string, tried: ReadonlySet<Upstream>): Upstream[] {
    return this.pool.healthy().filter((u) => !tried.has(u) && u.models.includes(model));
  }

  async forward(req: ForwardRequest, signal: AbortSignal): Promise<ForwardResult> {
    if (this.#draining) return { ok: false, refusal: refusal('draining') };
    const tried = new Set<Upstream>();
    let fallback: ForwardResponse | null = null;
    let problem: string | null = null;
    for (let n = 0; n < this.#opts.maxAttempts; n++) {
      const candidates = this.#candidates(req.model, tried);
      const first = n === 0 && req.first !== undefined ? candidates.find((c) => c.index === req.first) : undefined;
      const u = first ?? this.#picker.pick(candidates, req.affinityKey, this.pool).upstream;
      if (u === null) break;
      tried.add(u);
      if (n > 0) this.#numFailovers++;
      this.pool.acquire(u, req.affinityKey);
      this.#numInFlight++;
      let released = false;
      const release = (): void => {
        if (released) return;
        released = true;
        this.pool.release(u);
        if (--this.#numInFlight === 0) for (const w of this.#idleWaiters.splice(0)) w();
      };
      const a = await attempt({ url: `${u.url}${req.path}`, body: req.body, headers: { ...req.headers, ...u.headers }, stream: req.stream ?? false }, this.#limits, this.#agent, signal).catch((err: unknown) => {
        release();
        throw err;
      });
      if (a.kind !== 'response' || a.rest === null) release();
      if (a.kind === 'aborted') throw new DOMException('The client left before the upstream answered.', 'AbortError');
      if (a.kind === 'unreachable') {
        this.pool.reportFailure(u, a.reason);
        problem = `${u.url}: ${a.reason}`;
        continue;
      }
      if (a.kind === 'bad') {
        this.pool.reportUpstreamError(u, a.reason, a.stall);
        problem = `${u.url}: ${a.reason}`;
        continue;
      }
      if (a.status < 500) this.pool.reportGoodAnswer(u);
      // A stream is released when its body ends, or when the client leaves (undici then closes
      // the upstream connection), even if the body was never iterated.
      if (a.rest !== null) signal.addEventListener('abort', release, { once: true });
      const misbehaved = (err: UpstreamMisbehaved): void => {
        if (!signal.aborted) this.pool.reportUpstreamError(u, err.message, err.stall);
      };
      const response: ForwardResponse = { status: a.status, contentType: a.contentType, upstream: u.url, body: bodyOf(a.first, a.rest, release, misbehaved) };
      if (!RETRY_ELSEWHERE.has(a.status)) return { ok: true, response };
      fallback = response;
    }
    if (fallback !== null) return { ok: true, response: fallback };
    this.#numNoUpstream++;
    const message = problem === null ? undefined : `No upstream server for this model answered as an OpenAI server does (the last: ${problem.slice(0, 300)}); retry shortly.`;
    return { ok: false, refusal: refusal('no_upstream', { retryAfterS: this.#opts.retryAfterS, ...(message === undefined ? {} : { message }) }) };
  }

  async close(): Promise<void> {
    await this.#agent.close().catch(() => undefined);
    await this.pool.close();
  }
}

/** The first bytes, then the rest; `release` runs once when the body is over, however it ends; a bad event or a stall is reported. */
async function* bodyOf(first: Buffer, rest: AsyncIterable<Uint8Array> | null, release: () => void, misbehaved: (err: UpstreamMisbehaved) => void): AsyncGenerator<Uint8Array> {
  try {
    if (first.length > 0) yield first;
    if (rest !== null) yield* rest;
  } catch (err) {
    if (err instanceof UpstreamMisbehaved) misbehaved(err);
    throw err;
  } finally {
    release();
  }
}
