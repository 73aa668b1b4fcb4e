// The upstream pool: the one owner of every upstream's state (upstream.ts). It probes each
// upstream's health and reads its /metrics on a timer, ejects what stops answering, takes it back
// when it answers again, and counts the gateway's own requests in flight to each.
//
//   probe    GET /health within probeTimeoutMs. 2xx → healthy, unless a Headroom body says it is
//            loading or draining. `ejectAfterFailures` failed probes in a row → ejected. One good
//            probe takes an ejected (or new) upstream back; its /v1/models is read then.
//   passive  a request that cannot reach an upstream (connection refused, reset before its first
//            byte) ejects it at once (`reportFailure`): the next good probe takes it back.
//   errors   an upstream that answers what no OpenAI server sends (HTML, a malformed or oversized
//            event) or stalls is counted (`reportUpstreamError`); `ejectAfterFailures` such errors in
//            a row, or one stall, make it `degraded`: out of rotation, and no probe takes it back
//            before a hold of HOLD_BASE_MS, doubled each time it is degraded again without a good
//            answer in between (at most HOLD_MAX_MS). Its probes pass — they were never the
//            problem — so one good probe must not put it straight back in front of clients.
//   scrape   GET /metrics every scrapeIntervalMs (scrape.ts); a failed scrape keeps the old value,
//            which goes stale: the picker treats stale load as saturation.
//
// Every body the pool reads is read to a bound (bounded-body.ts): probe pages to
// MAX_PROBE_BODY_BYTES, /metrics to `maxMetricsBytes`; past it the connection is closed and the
// probe or scrape fails.
//
// Rounds run one after another (a timer set when the last one ended), so a slow upstream never
// piles probes up; `checkNow` runs one round at once (startup, tests). Listeners hear each change
// of health, so tests wait on events instead of sleeping.

import { Agent, request } from 'undici';
import type { Clock } from '../engine/clock.ts';
import { AffinityTrie } from './affinity.ts';
import { readBounded } from './bounded-body.ts';
import { parseLoad } from './scrape.ts';
import { DEFAULT_MAX_METRICS_BYTES } from './upstream-limits.ts';
import { Upstream } from './upstream.ts';
import type { UpstreamHealth, UpstreamSnapshot } from './upstream.ts';
import type { UpstreamFacts } from './gateway-load.ts';
import { NO_UPSTREAM_ACCESS, accessHeaders, connectOptions } from './upstream-access.ts';
import type { UpstreamAccess } from './upstream-access.ts';

export interface PoolOptions {
  readonly healthIntervalMs: number;
  readonly scrapeIntervalMs: number;
  /** A probe or scrape taking longer fails. */
  readonly probeTimeoutMs: number;
  /** Failed probes in a row that eject an upstream. */
  readonly ejectAfterFailures: number;
  /** Read /metrics (off: the picker sees only the gateway's own in-flight counts). */
  readonly scrapeMetrics: boolean;
  /** Prefix-affinity trie per upstream: matching unit (bytes) and capacity (bytes). */
  readonly affinityUnit: number;
  readonly affinityCapacity: number;
  /** Sequence slots of every upstream, overriding what it reports (0 or absent: what it reports). */
  readonly slotsPerUpstream?: number;
  /** Credentials and TLS for the upstreams (default: none, the system's CAs). */
  readonly access?: UpstreamAccess;
  /** Largest /metrics body read; a longer one fails the scrape (default DEFAULT_MAX_METRICS_BYTES). */
  readonly maxMetricsBytes?: number;
  readonly clock: Clock;
}

/** /health, /v1/models and /props: a model list of thousands of entries fits. */
const MAX_PROBE_BODY_BYTES = 4 << 20;
/** How long a degraded upstream is kept out at first, and at most (the hold doubles each time). */
const HOLD_BASE_MS = 5_000;
const HOLD_MAX_MS = 60_000;

export type HealthListener = (u: Upstream, from: UpstreamHealth, to: UpstreamHealth) => void;

export class UpstreamPool {
  readonly upstreams: readonly Upstream[];
  readonly #opts: PoolOptions;
  readonly #agent: Agent;
  readonly #listeners: HealthListener[] = [];
  readonly #maxMetricsBytes: number;
  #healthTimer: NodeJS.Timeout | null = null;
  #scrapeTimer: NodeJS.Timeout | null = null;
  #closed = false;

  constructor(urls: readonly string[], opts: PoolOptions) {
    if (urls.length === 0) throw new Error('UpstreamPool: expected at least one upstream URL');
    if (new Set(urls).size !== urls.length) throw new Error(`UpstreamPool: expected distinct upstream URLs, got ${urls.join(', ')}`);
    for (const k of ['healthIntervalMs', 'scrapeIntervalMs', 'probeTimeoutMs', 'ejectAfterFailures'] as const) {
      if (!Number.isInteger(opts[k]) || opts[k] <= 0) throw new Error(`UpstreamPool: expected ${k} to be a positive integer, got ${opts[k]}`);
    }
    const maxMetrics = opts.maxMetricsBytes ?? DEFAULT_MAX_METRICS_BYTES;
    if (!Number.isInteger(maxMetrics) || maxMetrics <= 0) throw new Error(`UpstreamPool: expected maxMetricsBytes to be a positive integer, got ${maxMetrics}`);
    this.#maxMetricsBytes = maxMetrics;
    this.#opts = opts;
    const access = opts.access ?? NO_UPSTREAM_ACCESS;
    this.upstreams = urls.map((url, i) => new Upstream(url, i, new AffinityTrie({ unit: opts.affinityUnit, capacity: opts.affinityCapacity }), accessHeaders(access, url)));
    this.#agent = new Agent({ connect: connectOptions(access, opts.probeTimeoutMs), headersTimeout: opts.probeTimeoutMs, bodyTimeout: opts.probeTimeoutMs, keepAliveTimeout: 10_000 });
  }

  // ---- public API ----

  onHealthChange(listener: HealthListener): void {
    this.#listeners.push(listener);
  }

  /** Probe and scrape now, then keep doing it on the timers. */
  async start(): Promise<void> {
    await this.checkNow();
    this.#scheduleHealth();
    this.#scheduleScrape();
  }

  /** One probe of every upstream, then one scrape, in parallel across upstreams. */
  async checkNow(): Promise<void> {
    await Promise.all(this.upstreams.map((u) => this.#probe(u)));
    await this.scrapeNow();
  }

  async scrapeNow(): Promise<void> {
    if (!this.#opts.scrapeMetrics) return;
    await Promise.all(this.upstreams.filter((u) => u.health === 'healthy').map((u) => this.#scrape(u)));
  }

  /** The upstreams a request may go to now. */
  healthy(): Upstream[] {
    return this.upstreams.filter((u) => u.health === 'healthy');
  }

  /** Whether `u`'s scraped load is too old to trust (or there is none): the picker counts it saturated. */
  isStale(u: Upstream, staleMs: number): boolean {
    if (!this.#opts.scrapeMetrics) return false;
    return u.loadAtMs === null || this.#opts.clock.nowMs() - u.loadAtMs > staleMs;
  }

  get scrapesMetrics(): boolean {
    return this.#opts.scrapeMetrics;
  }

  /** A request could not reach `u`: out of the pool until a probe answers. */
  reportFailure(u: Upstream, reason: string): void {
    u.numFailures++;
    this.#setHealth(u, 'ejected', reason);
  }

  /**
   * `u` answered a request with something no OpenAI server sends, or stalled (`stall`): counted;
   * degraded past `ejectAfterFailures` in a row, or at once for a stall (each one cost a client the
   * whole timeout).
   */
  reportUpstreamError(u: Upstream, reason: string, stall: boolean): void {
    u.numUpstreamErrors++;
    u.consecutiveErrors++;
    if (u.health !== 'healthy') return;
    if (!stall && u.consecutiveErrors < this.#opts.ejectAfterFailures) return;
    u.numFailures++;
    u.numDegradations++;
    const holdMs = Math.min(HOLD_MAX_MS, HOLD_BASE_MS * 2 ** (u.numDegradations - 1));
    u.heldUntilMs = this.#opts.clock.nowMs() + holdMs;
    this.#setHealth(u, 'degraded', `${reason}; held out ${holdMs} ms`);
  }

  /** `u` answered a request properly: its run of errors is over. */
  reportGoodAnswer(u: Upstream): void {
    u.consecutiveErrors = 0;
    u.numDegradations = 0;
  }

  /** A request goes to `u` (paired with `release`). */
  acquire(u: Upstream, affinityKey: readonly number[]): void {
    u.numInFlight++;
    u.numForwarded++;
    u.affinity.insert(affinityKey);
  }

  release(u: Upstream): void {
    if (u.numInFlight <= 0) throw new Error(`bug: release of ${u.url} with nothing in flight`);
    u.numInFlight--;
  }

  /** What `u`'s books read of it: its slots (the override, else what it reported) and KV use, while it is in the pool. */
  factsOf(u: Upstream): UpstreamFacts {
    const fixed = this.#opts.slotsPerUpstream ?? 0;
    return {
      slots: () => (u.health !== 'healthy' ? 0 : fixed > 0 ? fixed : (u.slots ?? 0)),
      kvUsage: () => (u.health === 'healthy' ? (u.load?.kvUsage ?? null) : null),
    };
  }

  snapshot(): UpstreamSnapshot[] {
    const now = this.#opts.clock.nowMs();
    return this.upstreams.map((u) => u.snapshot(now));
  }

  async close(): Promise<void> {
    this.#closed = true;
    if (this.#healthTimer !== null) clearTimeout(this.#healthTimer);
    if (this.#scrapeTimer !== null) clearTimeout(this.#scrapeTimer);
    await this.#agent.close();
  }

  // ---- helpers ----

  #scheduleHealth(): void {
    if (this.#closed) return;
    this.#healthTimer = setTimeout(() => {
      void Promise.all(this.upstreams.map((u) => this.#probe(u))).then(() => this.#scheduleHealth());
    }, this.#opts.healthIntervalMs);
    this.#healthTimer.unref();
  }

  #scheduleScrape(): void {
    if (this.#closed || !this.#opts.scrapeMetrics) return;
    this.#scrapeTimer = setTimeout(() => {
      void this.scrapeNow().then(() => this.#scheduleScrape());
    }, this.#opts.scrapeIntervalMs);
    this.#scrapeTimer.unref();
  }

  async #probe(u: Upstream): Promise<void> {
    const problem = await this.#healthProblem(u);
    if (this.#closed) return;
    // Degraded: its probes prove nothing until the hold is over; a failing one does not turn it
    // into `ejected` either (which one good probe would undo).
    if (u.health === 'degraded' && (problem !== null || this.#opts.clock.nowMs() < u.heldUntilMs)) return;
    if (problem === null) {
      u.consecutiveFailures = 0;
      if (u.health !== 'healthy') {
        // Back (or new): learn what it serves before it is picked.
        const models = await this.#models(u);
        if (models === null) return;
        await this.#props(u);
        if (this.#opts.scrapeMetrics) await this.#scrape(u);
        this.#setHealth(u, 'healthy', null);
      }
      return;
    }
    u.consecutiveFailures++;
    if (u.health === 'healthy' && u.consecutiveFailures < this.#opts.ejectAfterFailures) return;
    if (u.health === 'healthy') u.numFailures++;
    this.#setHealth(u, 'ejected', problem);
  }

  /** Null when the upstream answers its health probe as ready; otherwise why not. */
  async #healthProblem(u: Upstream): Promise<string | null> {
    try {
      const res = await request(`${u.url}/health`, { dispatcher: this.#agent, headers: u.headers, signal: AbortSignal.timeout(this.#opts.probeTimeoutMs) });
      const got = await readBounded(res.body, MAX_PROBE_BODY_BYTES);
      if (!got.ok) return `/health: ${got.reason}`;
      if (res.statusCode < 200 || res.statusCode >= 300) return `/health answered ${res.statusCode}`;
      // A Headroom upstream says when it is loading or draining (its /health stays 200 for both).
      const body = parseJson(got.text) as { loading?: unknown; draining?: unknown } | null;
      if (body?.draining === true) return 'draining';
      if (body?.loading === true) return 'loading';
      return null;
    } catch (err) {
      return `/health failed: ${describe(err)}`;
    }
  }

  async #models(u: Upstream): Promise<readonly string[] | null> {
    try {
      const res = await request(`${u.url}/v1/models`, { dispatcher: this.#agent, headers: u.headers, signal: AbortSignal.timeout(this.#opts.probeTimeoutMs) });
      const got = await readBounded(res.body, MAX_PROBE_BODY_BYTES);
      if (!got.ok) {
        this.#setHealth(u, 'ejected', `/v1/models: ${got.reason}`);
        return null;
      }
      const body = parseJson(got.text) as { data?: { id?: unknown; max_model_len?: unknown }[] } | null;
      if (res.statusCode !== 200 || !Array.isArray(body?.data)) {
        this.#setHealth(u, 'ejected', `/v1/models answered ${res.statusCode} without a model list`);
        return null;
      }
      const models = body.data.map((m) => m.id).filter((id): id is string => typeof id === 'string');
      const lens = body.data.map((m) => m.max_model_len).filter((n): n is number => typeof n === 'number' && n > 0);
      u.models = models;
      u.contextTokens = lens.length > 0 ? Math.max(...lens) : null;
      return models;
    } catch (err) {
      this.#setHealth(u, 'ejected', `/v1/models failed: ${describe(err)}`);
      return null;
    }
  }

  /** llama-server says how many slots it has on /props; other servers have no such page (a 404 is fine). */
  async #props(u: Upstream): Promise<void> {
    try {
      const res = await request(`${u.url}/props`, { dispatcher: this.#agent, headers: u.headers, signal: AbortSignal.timeout(this.#opts.probeTimeoutMs) });
      const got = await readBounded(res.body, MAX_PROBE_BODY_BYTES);
      const body = got.ok ? (parseJson(got.text) as { total_slots?: unknown } | null) : null;
      const n = body?.total_slots;
      u.slots = res.statusCode === 200 && typeof n === 'number' && Number.isInteger(n) && n > 0 ? n : null;
    } catch {
      u.slots = null;
    }
  }

  async #scrape(u: Upstream): Promise<void> {
    try {
      const res = await request(`${u.url}/metrics`, { dispatcher: this.#agent, headers: u.headers, signal: AbortSignal.timeout(this.#opts.probeTimeoutMs) });
      const got = await readBounded(res.body, this.#maxMetricsBytes);
      // A failed scrape keeps the old value, which goes stale.
      if (!got.ok) {
        u.scrapeFailure = `/metrics: ${got.reason}`;
        return;
      }
      if (res.statusCode !== 200) {
        u.scrapeFailure = `/metrics answered ${res.statusCode}`;
        return;
      }
      u.load = parseLoad(got.text);
      u.loadAtMs = this.#opts.clock.nowMs();
      u.scrapeFailure = null;
    } catch (err) {
      u.scrapeFailure = `/metrics failed: ${describe(err)}`;
    }
  }

  #setHealth(u: Upstream, to: UpstreamHealth, failure: string | null): void {
    const from = u.health;
    u.failure = failure;
    if (from === to) return;
    u.health = to;
    if (to === 'healthy') u.consecutiveFailures = 0;
    for (const l of this.#listeners) l(u, from, to);
  }
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return null;
  }
}

export function describe(err: unknown): string {
  const e = err as { code?: unknown; message?: unknown; cause?: { code?: unknown; message?: unknown } };
  const code = typeof e?.cause?.code === 'string' ? e.cause.code : typeof e?.code === 'string' ? e.code : null;
  const message = typeof e?.message === 'string' ? e.message : String(err);
  return code === null ? message : `${code}: ${message}`;
}
