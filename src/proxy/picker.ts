// The endpoint picker: which healthy upstream gets a request. Weighted scorers, each in [0, 1], as
// llm-d's endpoint picker has them, behind one guard:
//
//   guard   an upstream is saturated when its scraped load is stale (or missing while scraping),
//           its engine queue holds ≥ saturationQueue requests, its KV use is ≥ saturationKv, or it
//           holds ≥ maxInFlight of the gateway's requests (when set). Saturated upstreams are
//           picked only when every candidate is saturated (then the least loaded): a prefix hit
//           never sends a request to an overloaded replica, nor does a miss.
//   prefix  share of the request's affinity key the upstream's trie matches (affinity.ts)
//   queue   1 − q / max q over the candidates, q = engine queue (scraped) + gateway in flight
//   kv      1 − KV use (1 when unknown: no metrics is no evidence of pressure)
//
// score = wPrefix·prefix + wQueue·queue + wKv·kv; ties go to the fewest in flight, then round robin.
// The result is a plain record (the chosen upstream, why, every candidate's scores) that logs and
// tests read. Cost: O(candidates × key length) per pick.

import type { Upstream } from './upstream.ts';

export interface PickerOptions {
  readonly prefixWeight: number;
  readonly queueWeight: number;
  readonly kvWeight: number;
  /** Scraped engine queue depth at which an upstream counts as saturated. */
  readonly saturationQueue: number;
  /** Scraped KV use (0..1) at which an upstream counts as saturated. */
  readonly saturationKv: number;
  /** The gateway's own requests in flight to one upstream at which it counts as saturated (Infinity: no such bound). */
  readonly maxInFlight: number;
  /** Scraped load older than this counts as saturation. */
  readonly staleMs: number;
}

export interface CandidateScore {
  readonly upstream: number;
  readonly saturated: boolean;
  readonly prefix: number;
  readonly queue: number;
  readonly kv: number;
  readonly total: number;
}

/** One decision of the picker. */
export interface Pick {
  /** The chosen upstream, or null when there was no candidate. */
  readonly upstream: Upstream | null;
  /** `scored`: the best of the unsaturated; `all_saturated`: every candidate was, the least loaded won; `none`: no candidate. */
  readonly reason: 'scored' | 'all_saturated' | 'none';
  /** Key elements the chosen upstream's trie matched. */
  readonly matchedTokens: number;
  readonly scores: readonly CandidateScore[];
}

/** What the picker reads of the pool. */
export interface LoadView {
  isStale(u: Upstream, staleMs: number): boolean;
}

export class Picker {
  readonly #o: PickerOptions;
  #turn = 0;

  constructor(opts: PickerOptions) {
    for (const k of ['prefixWeight', 'queueWeight', 'kvWeight'] as const) {
      if (!(opts[k] >= 0) || !Number.isFinite(opts[k])) throw new Error(`Picker: expected ${k} to be a finite number ≥ 0, got ${opts[k]}`);
    }
    if (!(opts.saturationKv > 0 && opts.saturationKv <= 1)) throw new Error(`Picker: expected saturationKv in (0, 1], got ${opts.saturationKv}`);
    if (!(opts.saturationQueue >= 1)) throw new Error(`Picker: expected saturationQueue ≥ 1, got ${opts.saturationQueue}`);
    if (!(opts.maxInFlight >= 1)) throw new Error(`Picker: expected maxInFlight ≥ 1 (Infinity: none), got ${opts.maxInFlight}`);
    this.#o = opts;
  }

  pick(candidates: readonly Upstream[], key: readonly number[], view: LoadView): Pick {
    if (candidates.length === 0) return { upstream: null, reason: 'none', matchedTokens: 0, scores: [] };
    const o = this.#o;
    const saturated = candidates.map((u) => this.#saturated(u, view));
    const anyOpen = saturated.some((s) => !s);
    const queueOf = (u: Upstream): number => (u.load?.numWaiting ?? 0) + u.numInFlight;
    const maxQueue = Math.max(...candidates.map(queueOf));
    const matched = candidates.map((u) => u.affinity.match(key));
    const scores: CandidateScore[] = candidates.map((u, i) => {
      const prefix = key.length === 0 ? 0 : matched[i]! / key.length;
      const queue = maxQueue === 0 ? 1 : 1 - queueOf(u) / maxQueue;
      const kv = 1 - (u.load?.kvUsage ?? 0);
      // Every candidate saturated: only load decides (no affinity to an overloaded replica).
      const total = anyOpen ? o.prefixWeight * prefix + o.queueWeight * queue + o.kvWeight * kv : queue;
      return { upstream: u.index, saturated: saturated[i]!, prefix, queue, kv, total };
    });
    let best = -1;
    const turn = this.#turn++;
    const n = candidates.length;
    // Round robin among equals: start the scan at a rotating offset.
    for (let k = 0; k < n; k++) {
      const i = (turn + k) % n;
      if (anyOpen && saturated[i]!) continue;
      if (best === -1) {
        best = i;
        continue;
      }
      const a = scores[i]!.total;
      const b = scores[best]!.total;
      if (a > b + 1e-12 || (Math.abs(a - b) <= 1e-12 && candidates[i]!.numInFlight < candidates[best]!.numInFlight)) best = i;
    }
    return { upstream: candidates[best]!, reason: anyOpen ? 'scored' : 'all_saturated', matchedTokens: matched[best]!, scores };
  }

  #saturated(u: Upstream, view: LoadView): boolean {
    const o = this.#o;
    if (u.numInFlight >= o.maxInFlight) return true;
    if (view.isStale(u, o.staleMs)) return true;
    const l = u.load;
    if (l === null) return false;
    return (l.numWaiting ?? 0) >= o.saturationQueue || (l.kvUsage ?? 0) >= o.saturationKv;
  }
}
