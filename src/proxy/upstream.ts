// One upstream OpenAI-compatible server as the gateway sees it: whether it answers, what it serves,
// how loaded it said it was, how many of the gateway's requests it holds, and the prefix trie of
// what was sent there. The pool (pool.ts) is the one owner of this state; everyone else reads it.

import type { AffinityTrie } from './affinity.ts';
import type { UpstreamLoad } from './scrape.ts';

export type UpstreamHealth =
  /** Not probed yet: never picked. */
  | 'unknown'
  | 'healthy'
  /** Failed its probes (or a request could not reach it): never picked until a probe succeeds. */
  | 'ejected'
  /**
   * Answered its probes but misbehaved on requests (answers no OpenAI server sends, a stall): never
   * picked until its hold is over (`heldUntilMs`) and a probe succeeds after it.
   */
  | 'degraded';

export interface UpstreamSnapshot {
  readonly url: string;
  readonly health: UpstreamHealth;
  /** Why it was last ejected (null while healthy). */
  readonly failure: string | null;
  readonly models: readonly string[];
  readonly numInFlight: number;
  readonly slots: number | null;
  readonly load: UpstreamLoad | null;
  /** Age of `load`, ms (null: never scraped). */
  readonly loadAgeMs: number | null;
  readonly numForwarded: number;
  readonly numFailures: number;
  /** Requests it answered with something no OpenAI server sends (wrong content type, a malformed or oversized event) or stalled on. */
  readonly numUpstreamErrors: number;
  /** Why its last scrape of /metrics failed (null: the last one succeeded, or none ran). */
  readonly scrapeFailure: string | null;
  readonly affinityTokens: number;
}

export class Upstream {
  /** Base URL without a trailing slash, as configured. */
  readonly url: string;
  /** Position in the configured list: the stable id in metrics and picks. */
  readonly index: number;
  readonly affinity: AffinityTrie;
  /** What every request the gateway sends it carries besides its own (its credentials). */
  readonly headers: Readonly<Record<string, string>>;
  health: UpstreamHealth = 'unknown';
  failure: string | null = null;
  consecutiveFailures = 0;
  models: readonly string[] = [];
  /** Largest context the upstream reported (max_model_len), or null. */
  contextTokens: number | null = null;
  /** Sequence slots the upstream reported (llama-server's /props `total_slots`), or null. */
  slots: number | null = null;
  load: UpstreamLoad | null = null;
  /** Clock ms of the last successful scrape. */
  loadAtMs: number | null = null;
  numInFlight = 0;
  numForwarded = 0;
  numFailures = 0;
  numUpstreamErrors = 0;
  /** Upstream errors since its last good answer: past the pool's threshold it is degraded. */
  consecutiveErrors = 0;
  /** Times it was degraded in a row (each doubles the hold); reset by a good answer. */
  numDegradations = 0;
  /** Clock ms before which no probe takes a degraded upstream back. */
  heldUntilMs = 0;
  scrapeFailure: string | null = null;

  constructor(url: string, index: number, affinity: AffinityTrie, headers: Readonly<Record<string, string>> = {}) {
    this.url = url;
    this.index = index;
    this.affinity = affinity;
    this.headers = headers;
  }

  snapshot(nowMs: number): UpstreamSnapshot {
    return {
      url: this.url,
      health: this.health,
      failure: this.failure,
      models: this.models,
      numInFlight: this.numInFlight,
      slots: this.slots,
      load: this.load,
      loadAgeMs: this.loadAtMs === null ? null : Math.round(nowMs - this.loadAtMs),
      numForwarded: this.numForwarded,
      numFailures: this.numFailures,
      numUpstreamErrors: this.numUpstreamErrors,
      scrapeFailure: this.scrapeFailure,
      affinityTokens: this.affinity.numTokens,
    };
  }
}

/** A base URL as the pool keeps it: http(s), no trailing slash, no query; anything else is refused with the reason. */
export function normalizeUpstreamUrl(raw: string): string {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw new Error(`expected an upstream URL like http://host:8000, got '${raw}'`);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error(`expected an http:// or https:// upstream URL, got '${raw}'`);
  if (u.search !== '' || u.hash !== '') throw new Error(`expected an upstream URL without query or fragment, got '${raw}'`);
  if (u.username !== '' || u.password !== '') throw new Error(`expected an upstream URL without credentials, got '${raw}'`);
  // A base given with /v1 means the same server: requests add /v1/... themselves.
  const path = u.pathname.replace(/\/+$/, '').replace(/\/v1$/, '');
  return `${u.protocol}//${u.host}${path}`;
}
