// Flow control for several gateway replicas sharing their caps through a SharedStore (Redis). Two
// stages, the first unchanged:
//
//   acquire ─▶ local FlowController (full caps: queue, bands, tenant round-robin, TTL, 400s)
//                  │ local grant (holds a local slot)
//                  ▼
//              global stage (shared-waiters.ts) ─▶ store.sync(held, batch) ─▶ ticket
//                                       (highest band first; in order; no overtaking)
//
// The local grant is not final: the request then needs a global reservation, taken by the store's
// atomic script (shared-script.ts) so that the sum over replicas never passes a cap. A request the
// script does not grant waits in the global stage (holding its local slot, so the local caps bound
// the stage too) until a later sync grants it, its TTL (counted from acquire) passes (429 queue_ttl
// with Retry-After), or its client leaves. With no queue (--flow-queue-size 0) it is refused at once.
//
// Syncs: at most one in flight per replica; everything that happens meanwhile (arrivals, releases)
// goes into the next one, so a burst costs one round trip per batch, not per request. A sync
// follows every change (arrival, release); while requests wait for capacity other replicas may
// free, a poll timer syncs every `pollMs`; while idle a heartbeat renews the lease every leaseMs/3.
// A release syncs after the current microtasks, once the local stage has moved its own next waiter
// into the global stage, so the other replicas never see the freed slot without that waiter. Which
// replica's waiter goes first across replicas is the script's business (replicas take turns).
//
// Fallback: a sync that fails (refused, timed out) turns the replica to `local-fallback`: it grants
// from a local share of each cap, ⌊cap / replicas⌋ (at least 1; `replicas` configured, else the
// live replicas last seen, else 1), counting everything it holds, and probes the store on the
// heartbeat. The first probe that succeeds writes everything held (including what the fallback
// admitted) into the shared counts and turns the mode back to `redis`: the shared totals may then
// exceed a cap until those requests drain, and meanwhile no replica admits more (the safe option).
//
// Invariants: `#held` is what this replica holds globally (granted by a sync or by the fallback,
// minus releases) and is what every sync writes; a request gets at most one ticket and a ticket
// gives back once; every local slot taken is given back exactly once.

import { refusal } from '../backend/refusal.ts';
import { bug } from '../util/bug.ts';
import type { FlowControl, FlowDecision, FlowListener, FlowRequest, FlowResult, FlowStats, FlowTicket, SharedFlowState } from './flow-control.ts';
import type { FlowLimits } from './flow-core.ts';
import { bandLimit } from './flow-core.ts';
import { FlowController } from './flow-controller.ts';
import { DrainRate } from './drain-rate.ts';
import type { FlowCounts, Reservation } from './shared-script.ts';
import type { SharedStore } from './shared-store.ts';
import { SharedWaiters } from './shared-waiters.ts';

export interface SharedFlowOptions {
  /** Replicas the caps are split over in fallback (0: the live replicas last seen, 1 before any). */
  readonly replicas: number;
  /** The store's lease; the heartbeat (and the fallback's probe) runs every leaseMs / 3. */
  readonly leaseMs: number;
  /** How often requests waiting for global capacity are retried. */
  readonly pollMs: number;
  /** Most requests per sync. */
  readonly maxBatch?: number;
}

type Entry = {
  readonly req: FlowRequest;
  readonly deadlineMs: number;
  readonly waitedLocally: boolean;
  /** A sync (or the fallback share) did not grant it at least once: it waited for capacity. */
  blocked: boolean;
  readonly local: FlowTicket;
  state: 'waiting' | 'granted' | 'gone';
  settle: (r: FlowResult) => void;
  readonly signal: AbortSignal;
  onAbort: () => void;
};

const ZERO: FlowCounts = { requests: 0, inputTokens: 0, totalTokens: 0 };

export class SharedFlowController implements FlowControl {
  readonly name = 'caps-shared';
  readonly needsTokens: boolean;
  readonly #local: FlowController;
  readonly #store: SharedStore;
  readonly #opts: Required<SharedFlowOptions>;
  readonly #now: () => number;
  readonly #listeners: FlowListener[] = [];
  readonly #waiters: SharedWaiters<Entry>;
  readonly #drain: DrainRate;
  #held: FlowCounts = ZERO;
  #syncing = false;
  /** Something changed while a sync was in flight (an arrival): sync again as soon as it answers. */
  #again = false;
  #dirty = true;
  #shared: { mode: 'redis' | 'local-fallback'; sinceMs: number; lastError: string | null; replicasSeen: number; total: FlowCounts | null; numFallbacks: number };
  /** The heartbeat asks for a call: the lease's renewal, or in fallback the probe. */
  #beatDue = true;
  readonly #heartbeat: NodeJS.Timeout;
  #poll: NodeJS.Timeout | null = null;
  #closed = false;
  #soon = false;

  constructor(limits: FlowLimits, store: SharedStore, opts: SharedFlowOptions, now: () => number = () => performance.now()) {
    if (!(Number.isInteger(opts.replicas) && opts.replicas >= 0)) throw new Error(`--flow-replicas: expected an integer ≥ 0, got ${opts.replicas}`);
    if (!(Number.isInteger(opts.leaseMs) && opts.leaseMs >= 30)) throw new Error(`--flow-redis-lease-ms: expected an integer ≥ 30, got ${opts.leaseMs}`);
    if (!(Number.isInteger(opts.pollMs) && opts.pollMs >= 1)) throw new Error(`--flow-redis-poll-ms: expected an integer ≥ 1, got ${opts.pollMs}`);
    this.#local = new FlowController(limits, now);
    this.#store = store;
    this.#opts = { maxBatch: 64, ...opts };
    this.#now = now;
    this.needsTokens = this.#local.needsTokens;
    this.#waiters = new SharedWaiters(limits.shares.length);
    this.#drain = new DrainRate(now);
    // Until the first sync answers, the fallback serves (a replica starting with Redis down still serves).
    this.#shared = { mode: 'local-fallback', sinceMs: Date.now(), lastError: null, replicasSeen: 0, total: null, numFallbacks: 0 };
    // Refusals of the local stage are this controller's; its grants are not final, so not forwarded.
    this.#local.onDecision((band, tenant, d) => {
      if (d !== 'admitted' && d !== 'admitted_after_wait') this.#decided(band, tenant, d);
    });
    this.#heartbeat = setInterval(() => this.#beat(), Math.max(10, Math.floor(opts.leaseMs / 3)));
    this.#heartbeat.unref();
    this.#pump();
  }

  get limits(): FlowLimits {
    return this.#local.limits;
  }

  get numBands(): number {
    return this.#local.numBands;
  }

  band(header: string | string[] | undefined): number {
    return this.#local.band(header);
  }

  onDecision(listener: FlowListener): void {
    this.#listeners.push(listener);
  }

  state(): FlowStats {
    const s = this.#shared;
    const shared: SharedFlowState = {
      mode: s.mode,
      since: new Date(s.sinceMs).toISOString(),
      lastError: s.lastError,
      replicasSeen: s.replicasSeen,
      replicaId: this.#store.replicaId,
      held: this.#held,
      total: s.total,
      waitingGlobal: this.#waiters.numWaiting,
      fallbacks: s.numFallbacks,
    };
    return { ...this.#local.state(), shared };
  }

  acquire(req: FlowRequest, signal: AbortSignal): Promise<FlowResult> {
    const deadlineMs = this.#now() + this.limits.queueTtlMs;
    const r = this.#local.acquire(req, signal);
    if (r instanceof Promise) return r.then((res) => this.#global(req, res, signal, deadlineMs, true));
    return this.#global(req, r, signal, deadlineMs, false);
  }

  /** Stops the timers and leaves the shared state (what it holds comes back now). */
  async close(): Promise<void> {
    this.#closed = true;
    clearInterval(this.#heartbeat);
    if (this.#poll !== null) clearTimeout(this.#poll);
    await this.#store.close();
  }

  #global(req: FlowRequest, res: FlowResult, signal: AbortSignal, deadlineMs: number, waitedLocally: boolean): Promise<FlowResult> {
    if (!res.ok) return Promise.resolve(res);
    return new Promise<FlowResult>((resolve) => {
      const e: Entry = { req, deadlineMs, waitedLocally, local: res.ticket, blocked: false, state: 'waiting', settle: resolve, signal, onAbort: () => undefined };
      e.onAbort = () => {
        this.#leave(e, 'client_left', 'The client left while the request waited.', null);
        this.#pumpSoon();
      };
      signal.addEventListener('abort', e.onAbort, { once: true });
      this.#waiters.push(e);
      if (signal.aborted) e.onAbort();
      else this.#pump();
    });
  }

  /** One step: expire, then grant from the fallback share or ask the store. Re-entered after every sync. */
  #pump(): void {
    if (this.#closed) return;
    this.#expire();
    if (this.#shared.mode === 'local-fallback') this.#grantLocally();
    if (this.#syncing) {
      this.#again = true;
      return;
    }
    this.#again = false;
    const redis = this.#shared.mode === 'redis';
    const batch = redis ? this.#waiters.ordered(this.#opts.maxBatch) : [];
    // In fallback the store is only probed on the heartbeat; in redis mode every change syncs.
    if (redis ? batch.length === 0 && !this.#dirty && !this.#beatDue : !this.#beatDue) return this.#armPoll();
    this.#syncing = true;
    this.#dirty = false;
    this.#beatDue = false;
    const reservations = batch.map((e) => this.#reservation(e, 1));
    this.#store.sync(this.#held, reservations).then(
      (res) => {
        this.#syncing = false;
        const resumed = this.#shared.mode !== 'redis';
        if (resumed) this.#shared = { ...this.#shared, mode: 'redis', sinceMs: Date.now() };
        this.#shared.replicasSeen = res.numReplicas;
        this.#shared.total = res.total;
        const granted = batch.slice(0, res.numGranted);
        for (const e of granted) this.#grant(e);
        for (const e of batch.slice(res.numGranted)) {
          e.blocked = true;
          // No queue: refused now, as a local cap would.
          if (this.limits.queueSize === 0) this.#leave(e, 'queue_full', 'Too many requests in flight across the gateway replicas (the shared caps are reached) and the wait queue is off; retry shortly.', this.#drain.secondsFor(1));
        }
        if (res.numGranted > 0 || this.#dirty || resumed || this.#again) this.#pump();
        else this.#armPoll();
      },
      (err: unknown) => {
        this.#syncing = false;
        this.#dirty = true;
        const message = err instanceof Error ? err.message : String(err);
        if (this.#shared.mode === 'redis') this.#shared = { ...this.#shared, mode: 'local-fallback', sinceMs: Date.now(), numFallbacks: this.#shared.numFallbacks + 1, lastError: message };
        else this.#shared.lastError = message;
        this.#grantLocally();
        this.#armPoll();
      },
    );
  }

  /** Fallback: grant in order while each fits this replica's share; a request larger than the share is refused (429: it fits once Redis is back). */
  #grantLocally(): void {
    for (const e of this.#waiters.ordered()) {
      const r = this.#reservation(e, this.#fallbackReplicas());
      const h = this.#held;
      if (h.requests + 1 <= r.maxRequests && h.inputTokens + e.req.inputTokens <= r.maxInputTokens && h.totalTokens + e.req.totalTokens <= r.maxTotalTokens) {
        this.#grant(e);
        this.#dirty = true;
      } else if (e.req.inputTokens > r.maxInputTokens || e.req.totalTokens > r.maxTotalTokens) {
        this.#leave(e, 'queue_full', 'The shared flow-control state (Redis) is unreachable and this request is larger than this replica\'s local share of the token caps; retry shortly.', 1);
      } else if (this.limits.queueSize === 0) {
        this.#leave(e, 'queue_full', 'Too many requests in flight: this replica\'s local share of the caps is reached (the shared state, Redis, is unreachable) and the wait queue is off; retry shortly.', this.#drain.secondsFor(1));
      } else {
        e.blocked = true;
        return;
      }
    }
  }

  #fallbackReplicas(): number {
    return this.#opts.replicas > 0 ? this.#opts.replicas : Math.max(1, this.#shared.replicasSeen);
  }

  /** The request's limits: its band's share of each cap, split over `replicas`. */
  #reservation(e: Entry, replicas: number): Reservation {
    const share = this.limits.shares[e.req.band]!;
    const split = (cap: number): number => bandLimit(cap === Infinity ? cap : Math.max(1, Math.floor(cap / replicas)), share);
    return { band: e.req.band, blocked: e.blocked, inputTokens: e.req.inputTokens, totalTokens: e.req.totalTokens, maxRequests: split(this.limits.maxRequests), maxInputTokens: split(this.limits.maxInputTokens), maxTotalTokens: split(this.limits.maxTotalTokens) };
  }

  #grant(e: Entry): void {
    this.#held = add(this.#held, e.req, +1);
    if (e.state !== 'waiting') {
      // It left while its sync was in flight: the reservation was taken, so give it back at once.
      this.#held = add(this.#held, e.req, -1);
      this.#dirty = true;
      return;
    }
    this.#take(e, 'granted');
    this.#decided(e.req.band, e.req.caller.tenant, e.waitedLocally || e.blocked ? 'admitted_after_wait' : 'admitted');
    let held = true;
    e.settle({
      ok: true,
      ticket: {
        release: () => {
          if (!held) return;
          held = false;
          this.#held = add(this.#held, e.req, -1);
          this.#drain.record();
          this.#dirty = true;
          e.local.release();
          this.#pumpSoon();
        },
      },
    });
  }

  /** A waiting entry leaves without a ticket: its local slot goes back, the client gets a refusal. */
  #leave(e: Entry, decision: FlowDecision, message: string, retryAfterS: number | null): void {
    if (e.state !== 'waiting') return;
    this.#take(e, 'gone');
    // The shared state may note it as this replica's waiting head: the next sync clears that.
    this.#dirty = true;
    e.local.release();
    this.#decided(e.req.band, e.req.caller.tenant, decision);
    e.settle({ ok: false, refusal: refusal('flow_cap', { message, retryAfterS }) });
  }

  #take(e: Entry, to: 'granted' | 'gone'): void {
    this.#waiters.take(e, to);
    e.signal.removeEventListener('abort', e.onAbort);
  }

  #expire(): void {
    const now = this.#now();
    for (const e of this.#waiters.ordered()) {
      if (e.deadlineMs <= now) this.#leave(e, 'queue_ttl', `Waited ${this.limits.queueTtlMs} ms for a slot (--flow-queue-ttl-ms) across the gateway replicas without getting one; retry later.`, this.#drain.secondsFor(this.#waiters.numWaiting + 1));
    }
  }

  /** Waiters retry on a timer (capacity may free on another replica); so does the fallback's probe. */
  #armPoll(): void {
    if (this.#poll !== null || this.#closed || this.#waiters.numWaiting === 0) return;
    this.#poll = setTimeout(() => {
      this.#poll = null;
      this.#pump();
    }, this.#opts.pollMs);
    this.#poll.unref();
  }

  /**
   * A pump after the current microtasks: a local slot just given back may have started a local
   * waiter, which reaches the global stage in a promise continuation. Syncing before it arrives
   * would show the freed capacity to the other replicas while this replica's waiter is invisible.
   */
  #pumpSoon(): void {
    if (this.#soon) return;
    this.#soon = true;
    setImmediate(() => {
      this.#soon = false;
      this.#pump();
    });
  }

  #beat(): void {
    this.#beatDue = true;
    this.#pump();
  }

  #decided(band: number, tenant: string, d: FlowDecision): void {
    for (const l of this.#listeners) l(band, tenant, d);
  }
}

function add(h: FlowCounts, c: { readonly inputTokens: number; readonly totalTokens: number }, sign: 1 | -1): FlowCounts {
  const out = { requests: h.requests + sign, inputTokens: h.inputTokens + sign * c.inputTokens, totalTokens: h.totalTokens + sign * c.totalTokens };
  if (out.requests < 0 || out.inputTokens < 0 || out.totalTokens < 0) bug('SharedFlowController: negative holding (a ticket released twice?)');
  return out;
}
