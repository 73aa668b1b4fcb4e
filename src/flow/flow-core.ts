// The flow-control state machine: what is in flight, who waits, who goes next. Pure and
// synchronous (no timers, no promises; the clock is injected), so every interleaving can be
// driven by a test; flow-controller.ts is the thin async layer over it.
//
// Invariants:
//   - Check and count are one call (`offer`, `release`, `cancel`, `expire` each check and count
//     before returning): with nothing awaited in between, no burst can pass a cap by one.
//   - For every band b with share s_b: a request of band b starts only if, after it starts,
//     in-flight requests ≤ ⌊s_b·maxRequests⌋, input tokens ≤ ⌊s_b·maxInputTokens⌋ and total
//     tokens ≤ ⌊s_b·maxTotalTokens⌋ (each at least 1). Shares rise with the band and the top band's
//     is 1, so as load rises the lowest band is refused first and the top band may fill every cap.
//     The same shares bound the wait queue: band b may join it only while fewer than
//     ⌊s_b·queueSize⌋ requests wait.
//   - Strict order: nothing of band b starts while a request of a band ≥ b waits (an arrival
//     queues behind them); the queue is served from the highest non-empty band, and serving stops
//     at the first head that does not fit (no overtaking, so large requests do not starve).
//   - Fairness inside a band: one FIFO per tenant and a ring of backlogged tenants; the tenant at
//     the front of the ring is served next and then goes to its back (round-robin by request).
//   - A waiter leaves the queue exactly once: granted, cancelled (client gone) or expired (TTL).
//     Removal from the middle is lazy (the entry is marked gone, the counts drop at once).
//
// Cost: offer, release per grant, cancel and expire per entry are O(bands) (bands ≤ 16); the
// per-tenant FIFOs are compacted when gone entries outnumber live ones.

import { Fifo } from './fifo.ts';
import { DrainRate } from './drain-rate.ts';

/** The caps, off when Infinity. */
export interface FlowLimits {
  /** Requests in flight (admitted, unfinished). */
  readonly maxRequests: number;
  /** Prompt tokens of the requests in flight. */
  readonly maxInputTokens: number;
  /** Prompt tokens plus max_tokens × n of the requests in flight. */
  readonly maxTotalTokens: number;
  /** Share of every cap each band may fill, lowest band first; non-decreasing, in (0, 1], the last 1. */
  readonly shares: readonly number[];
  /** Most requests waiting, all bands together (0: refuse at once when a cap is reached). */
  readonly queueSize: number;
  /** Longest wait in the queue, ms. */
  readonly queueTtlMs: number;
}

/** What a request holds while it runs. */
export interface FlowCost {
  readonly inputTokens: number;
  readonly totalTokens: number;
}

/** Which limit stopped a request (for its message). */
export type Blocker = 'request_cap' | 'input_token_cap' | 'total_token_cap' | 'queued_ahead';

export type WaiterState = 'queued' | 'granted' | 'gone';

export interface Waiter<T> {
  readonly band: number;
  readonly tenant: string;
  readonly cost: FlowCost;
  readonly enqueuedMs: number;
  readonly deadlineMs: number;
  state: WaiterState;
  /** The async layer's handle (its promise's resolver). */
  readonly payload: T;
}

export type Offer<T> =
  | { readonly kind: 'granted' }
  | { readonly kind: 'queued'; readonly waiter: Waiter<T> }
  | { readonly kind: 'refused'; readonly reason: 'queue_full' | 'too_large'; readonly blocker: Blocker; readonly retryAfterS: number | null };

/** The flow state as /stats and the metrics read it. */
export interface FlowState {
  readonly inFlight: { readonly requests: number; readonly inputTokens: number; readonly totalTokens: number };
  /** Waiting requests per band, lowest band first. */
  readonly queued: readonly number[];
  /** Releases per second lately (0 before any). */
  readonly drainPerS: number;
}

interface Band<T> {
  numQueued: number;
  readonly tenants: Map<string, { readonly fifo: Fifo<Waiter<T>>; numLive: number; inRing: boolean }>;
  readonly ring: Fifo<string>;
}

export class FlowCore<T> {
  readonly limits: FlowLimits;
  readonly #now: () => number;
  readonly #bands: Band<T>[];
  /** Every waiter in arrival order: with one TTL, also deadline order. */
  readonly #byDeadline = new Fifo<Waiter<T>>();
  readonly #drain: DrainRate;
  #numRequests = 0;
  #inputTokens = 0;
  #totalTokens = 0;
  #numQueued = 0;

  constructor(limits: FlowLimits, now: () => number) {
    validate(limits);
    this.limits = limits;
    this.#now = now;
    this.#bands = limits.shares.map(() => ({ numQueued: 0, tenants: new Map(), ring: new Fifo<string>() }));
    this.#drain = new DrainRate(now);
  }

  get numBands(): number {
    return this.#bands.length;
  }

  /** Start the request now (counted), queue it, or refuse it. */
  offer(band: number, tenant: string, cost: FlowCost, payload: T): Offer<T> {
    const share = this.#share(band);
    const l = this.limits;
    if (cost.inputTokens > bandLimit(l.maxInputTokens, share)) return this.#refused('too_large', 'input_token_cap', band);
    if (cost.totalTokens > bandLimit(l.maxTotalTokens, share)) return this.#refused('too_large', 'total_token_cap', band);
    const ahead = this.#queuedFrom(band);
    const blocker = ahead > 0 ? 'queued_ahead' : this.#blocker(band, cost);
    if (blocker === null) {
      this.#count(cost, +1);
      return { kind: 'granted' };
    }
    if (this.#numQueued >= bandLimit(l.queueSize, share)) return this.#refused('queue_full', blocker, band);
    const now = this.#now();
    const w: Waiter<T> = { band, tenant, cost, enqueuedMs: now, deadlineMs: now + l.queueTtlMs, state: 'queued', payload };
    this.#enqueue(w);
    return { kind: 'queued', waiter: w };
  }

  /** A started request ended: uncount it and start whoever now fits (returned, already counted). */
  release(cost: FlowCost): Waiter<T>[] {
    if (this.#numRequests <= 0) throw new Error('FlowCore.release: nothing is in flight (a ticket released twice?)');
    this.#count(cost, -1);
    this.#drain.record();
    return this.#dispatch();
  }

  /** A waiter's client left: take it out of the queue. False if it was no longer queued. Returns who started because it left. */
  cancel(w: Waiter<T>): { readonly removed: boolean; readonly granted: Waiter<T>[] } {
    if (w.state !== 'queued') return { removed: false, granted: [] };
    this.#remove(w);
    return { removed: true, granted: this.#dispatch() };
  }

  /** Take out every waiter whose deadline has passed; returns them and who started because they left. */
  expire(): { readonly expired: Waiter<T>[]; readonly granted: Waiter<T>[] } {
    const now = this.#now();
    const expired: Waiter<T>[] = [];
    for (let w = this.#byDeadline.peek(); w !== undefined; w = this.#byDeadline.peek()) {
      if (w.state === 'queued') {
        if (w.deadlineMs > now) break;
        this.#remove(w);
        expired.push(w);
      }
      this.#byDeadline.shift();
    }
    return { expired, granted: expired.length > 0 ? this.#dispatch() : [] };
  }

  /** The earliest deadline of a waiter, or null when none waits. */
  nextDeadlineMs(): number | null {
    for (let w = this.#byDeadline.peek(); w !== undefined; w = this.#byDeadline.peek()) {
      if (w.state === 'queued') return w.deadlineMs;
      this.#byDeadline.shift();
    }
    return null;
  }

  /** Seconds until a request of `band` might get a slot, from the drain rate (null: no rate measured yet). */
  retryAfterS(band: number): number | null {
    return this.#drain.secondsFor(this.#queuedFrom(band) + 1);
  }

  state(): FlowState {
    return {
      inFlight: { requests: this.#numRequests, inputTokens: this.#inputTokens, totalTokens: this.#totalTokens },
      queued: this.#bands.map((b) => b.numQueued),
      drainPerS: this.#drain.perS(),
    };
  }

  /** Tests: the counters agree with the queues. */
  checkInvariants(): void {
    let total = 0;
    for (const b of this.#bands) {
      let live = 0;
      for (const t of b.tenants.values()) live += t.numLive;
      if (live !== b.numQueued) throw new Error(`band counts ${b.numQueued} waiting, its tenants ${live}`);
      total += b.numQueued;
    }
    if (total !== this.#numQueued) throw new Error(`queue counts ${this.#numQueued}, bands ${total}`);
    if (this.#numRequests < 0 || this.#inputTokens < 0 || this.#totalTokens < 0) throw new Error('negative in-flight count');
  }

  // ---- helpers ----

  #share(band: number): number {
    const s = this.limits.shares[band];
    if (s === undefined) throw new Error(`FlowCore: band ${band} outside 0..${this.#bands.length - 1}`);
    return s;
  }

  /** The first cap a request of `band` would pass by starting now, or null if it fits. */
  #blocker(band: number, cost: FlowCost): Blocker | null {
    const share = this.#share(band);
    const l = this.limits;
    if (this.#numRequests + 1 > bandLimit(l.maxRequests, share)) return 'request_cap';
    if (this.#inputTokens + cost.inputTokens > bandLimit(l.maxInputTokens, share)) return 'input_token_cap';
    if (this.#totalTokens + cost.totalTokens > bandLimit(l.maxTotalTokens, share)) return 'total_token_cap';
    return null;
  }

  #queuedFrom(band: number): number {
    let n = 0;
    for (let b = band; b < this.#bands.length; b++) n += this.#bands[b]!.numQueued;
    return n;
  }

  #count(cost: FlowCost, sign: 1 | -1): void {
    this.#numRequests += sign;
    this.#inputTokens += sign * cost.inputTokens;
    this.#totalTokens += sign * cost.totalTokens;
  }

  #refused(reason: 'queue_full' | 'too_large', blocker: Blocker, band: number): Offer<T> {
    return { kind: 'refused', reason, blocker, retryAfterS: reason === 'too_large' ? null : this.retryAfterS(band) };
  }

  #enqueue(w: Waiter<T>): void {
    const band = this.#bands[w.band]!;
    let t = band.tenants.get(w.tenant);
    if (t === undefined) {
      t = { fifo: new Fifo(), numLive: 0, inRing: false };
      band.tenants.set(w.tenant, t);
    }
    t.fifo.push(w);
    t.numLive++;
    if (!t.inRing) {
      t.inRing = true;
      band.ring.push(w.tenant);
    }
    band.numQueued++;
    this.#numQueued++;
    this.#byDeadline.push(w);
  }

  #remove(w: Waiter<T>): void {
    w.state = 'gone';
    const band = this.#bands[w.band]!;
    const t = band.tenants.get(w.tenant)!;
    t.numLive--;
    band.numQueued--;
    this.#numQueued--;
    if (t.fifo.length > 2 * t.numLive + 16) t.fifo.retain((x) => x.state === 'queued');
  }

  /** Start waiters in strict band order, round-robin over tenants, until a head does not fit. */
  #dispatch(): Waiter<T>[] {
    const granted: Waiter<T>[] = [];
    for (;;) {
      const band = this.#topBand();
      if (band === null) return granted;
      const w = this.#head(band);
      if (this.#blocker(w.band, w.cost) !== null) return granted;
      const b = this.#bands[band]!;
      const t = b.tenants.get(w.tenant)!;
      t.fifo.shift();
      b.ring.shift();
      if (t.numLive > 1) b.ring.push(w.tenant);
      else t.inRing = false;
      t.numLive--;
      b.numQueued--;
      this.#numQueued--;
      w.state = 'granted';
      this.#count(w.cost, +1);
      granted.push(w);
    }
  }

  #topBand(): number | null {
    for (let b = this.#bands.length - 1; b >= 0; b--) if (this.#bands[b]!.numQueued > 0) return b;
    return null;
  }

  /** The next waiter of a band with some waiting: the front tenant's oldest live entry (dropping gone ones on the way). */
  #head(band: number): Waiter<T> {
    const b = this.#bands[band]!;
    for (;;) {
      const tenant = b.ring.peek();
      if (tenant === undefined) throw new Error('FlowCore: a band counts waiters but its ring is empty');
      const t = b.tenants.get(tenant)!;
      if (t.numLive === 0) {
        b.ring.shift();
        t.inRing = false;
        b.tenants.delete(tenant);
        continue;
      }
      let w = t.fifo.peek();
      while (w !== undefined && w.state !== 'queued') {
        t.fifo.shift();
        w = t.fifo.peek();
      }
      if (w === undefined) throw new Error('FlowCore: a tenant counts live waiters but has none');
      return w;
    }
  }
}

/** A cap scaled to a band's share: at least 1 (0 stays 0, Infinity stays Infinity). */
export function bandLimit(cap: number, share: number): number {
  if (cap === 0 || cap === Infinity) return cap;
  return Math.max(1, Math.floor(cap * share));
}

function validate(l: FlowLimits): void {
  const positive = (name: string, v: number): void => {
    if (!(v === Infinity || (Number.isInteger(v) && v > 0))) throw new Error(`flow control: expected ${name} to be a positive integer or unlimited, got ${v}`);
  };
  positive('the request cap', l.maxRequests);
  positive('the input-token cap', l.maxInputTokens);
  positive('the total-token cap', l.maxTotalTokens);
  if (!(Number.isInteger(l.queueSize) && l.queueSize >= 0)) throw new Error(`flow control: expected a queue size ≥ 0, got ${l.queueSize}`);
  if (!(Number.isFinite(l.queueTtlMs) && l.queueTtlMs > 0)) throw new Error(`flow control: expected a queue TTL > 0 ms, got ${l.queueTtlMs}`);
  const s = l.shares;
  if (s.length < 1 || s.length > 16) throw new Error(`--priority-bands: expected 1 to 16 priority bands, got ${s.length}`);
  s.forEach((v, i) => {
    if (!(v > 0 && v <= 1)) throw new Error(`--priority-bands: expected band shares in (0, 1], got ${v}`);
    if (i > 0 && v < s[i - 1]!) throw new Error(`--priority-bands: expected band shares to rise with the band, got ${s.join(',')}`);
  });
  if (s[s.length - 1] !== 1) throw new Error(`--priority-bands: expected the top band's share to be 1, got ${s[s.length - 1]}`);
}
