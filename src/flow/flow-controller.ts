// Flow control as the API uses it: the pure core (flow-core.ts) plus the waiting. A request that
// fits gets its ticket in the same synchronous call that counted it; one that must wait gets a
// promise, settled exactly once: by a release that starts it, by its client leaving (the abort
// signal takes it out of the queue at once, it never takes a slot), or by its TTL (429 with
// Retry-After from the drain rate). One timer, armed for the earliest deadline, expires waiters;
// it never keeps the process alive.
//
// A ticket gives back exactly what it counted, once, however the request ends; a second release
// does nothing. A request larger than its band may ever hold is a 400 `context_length_exceeded`
// (thrown, a RequestError the API's error handler renders): waiting or retrying cannot help it.

import { refusal } from '../backend/refusal.ts';
import type { Refusal } from '../backend/refusal.ts';
import { RequestError } from '../util/request-error.ts';
import type { FlowControl, FlowDecision, FlowListener, FlowRequest, FlowResult, FlowTicket } from './flow-control.ts';
import type { Blocker, FlowCost, FlowLimits, FlowState, Waiter } from './flow-core.ts';
import { FlowCore, bandLimit } from './flow-core.ts';
import { bandOf } from './priority.ts';

interface Pending {
  settle: ((r: FlowResult) => void) | null;
  signal: AbortSignal | null;
  onAbort: (() => void) | null;
}

export class FlowController implements FlowControl {
  readonly name = 'caps';
  readonly needsTokens: boolean;
  readonly #core: FlowCore<Pending>;
  readonly #now: () => number;
  readonly #listeners: FlowListener[] = [];
  #timer: NodeJS.Timeout | null = null;
  #timerAtMs = Infinity;

  constructor(limits: FlowLimits, now: () => number = () => performance.now()) {
    this.#core = new FlowCore(limits, now);
    this.#now = now;
    this.needsTokens = limits.maxInputTokens !== Infinity || limits.maxTotalTokens !== Infinity;
  }

  get limits(): FlowLimits {
    return this.#core.limits;
  }

  get numBands(): number {
    return this.#core.numBands;
  }

  band(header: string | string[] | undefined): number {
    return bandOf(header, this.numBands);
  }

  onDecision(listener: FlowListener): void {
    this.#listeners.push(listener);
  }

  state(): FlowState {
    return this.#core.state();
  }

  acquire(req: FlowRequest, signal: AbortSignal): FlowResult | Promise<FlowResult> {
    const tenant = req.caller.tenant;
    const cost: FlowCost = { inputTokens: req.inputTokens, totalTokens: req.totalTokens };
    if (signal.aborted) return this.#refuse(req.band, tenant, 'client_left', refusal('flow_cap', { message: 'The client left before the request started.' }));
    const pending: Pending = { settle: null, signal: null, onAbort: null };
    const o = this.#core.offer(req.band, tenant, cost, pending);
    if (o.kind === 'granted') {
      this.#decided(req.band, tenant, 'admitted');
      return { ok: true, ticket: this.#ticket(cost) };
    }
    if (o.kind === 'refused') {
      const message = this.#message(o.reason, o.blocker, req.band);
      if (o.reason === 'too_large') {
        // Retrying cannot help: a client error, not a 429.
        this.#decided(req.band, tenant, 'too_large');
        throw new RequestError('context_length_exceeded', message);
      }
      return this.#refuse(req.band, tenant, o.reason, refusal('flow_cap', { message, retryAfterS: o.retryAfterS }));
    }
    const w = o.waiter;
    const p = new Promise<FlowResult>((resolve) => (pending.settle = resolve));
    pending.signal = signal;
    pending.onAbort = () => {
      const { removed, granted } = this.#core.cancel(w);
      if (removed) this.#settle(w, this.#refuse(w.band, w.tenant, 'client_left', refusal('flow_cap', { message: 'The client left while the request waited.' })));
      this.#start(granted);
    };
    signal.addEventListener('abort', pending.onAbort, { once: true });
    this.#arm();
    return p;
  }

  #ticket(cost: FlowCost): FlowTicket {
    let held = true;
    return {
      release: () => {
        if (!held) return;
        held = false;
        this.#start(this.#core.release(cost));
      },
    };
  }

  /** Waiters the core just started (already counted): hand each its ticket. */
  #start(granted: readonly Waiter<Pending>[]): void {
    for (const w of granted) {
      this.#decided(w.band, w.tenant, 'admitted_after_wait');
      this.#settle(w, { ok: true, ticket: this.#ticket(w.cost) });
    }
  }

  #settle(w: Waiter<Pending>, r: FlowResult): void {
    const p = w.payload;
    if (p.onAbort !== null) p.signal?.removeEventListener('abort', p.onAbort);
    const settle = p.settle;
    p.settle = null;
    settle?.(r);
  }

  #refuse(band: number, tenant: string, decision: FlowDecision, r: Refusal): FlowResult {
    this.#decided(band, tenant, decision);
    return { ok: false, refusal: r };
  }

  #decided(band: number, tenant: string, d: FlowDecision): void {
    for (const l of this.#listeners) l(band, tenant, d);
  }

  /** One timer for the earliest deadline; deadlines come in arrival order, so an armed timer is never late. */
  #arm(): void {
    const at = this.#core.nextDeadlineMs();
    if (at === null || (this.#timer !== null && this.#timerAtMs <= at)) return;
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#timerAtMs = at;
    this.#timer = setTimeout(() => this.#expire(), Math.max(0, at - this.#now()) + 1);
    this.#timer.unref();
  }

  #expire(): void {
    this.#timer = null;
    this.#timerAtMs = Infinity;
    const { expired, granted } = this.#core.expire();
    for (const w of expired) {
      const message = `Waited ${this.limits.queueTtlMs} ms for a slot (--flow-queue-ttl-ms) without getting one; retry later.`;
      this.#settle(w, this.#refuse(w.band, w.tenant, 'queue_ttl', refusal('flow_cap', { message, retryAfterS: this.#core.retryAfterS(w.band) })));
    }
    this.#start(granted);
    this.#arm();
  }

  #message(reason: 'queue_full' | 'too_large', blocker: Blocker, band: number): string {
    const l = this.limits;
    const share = l.shares[band]!;
    const cap = (c: number): string => `${bandLimit(c, share)}${share < 1 ? ` for priority band ${band}` : ''}`;
    const what: Record<Blocker, string> = {
      request_cap: `the in-flight request cap (${cap(l.maxRequests)}) is reached`,
      input_token_cap: `the in-flight input-token cap (${cap(l.maxInputTokens)}) is reached`,
      total_token_cap: `the in-flight input-plus-output token cap (${cap(l.maxTotalTokens)}) is reached`,
      queued_ahead: 'requests of this priority or higher are waiting',
    };
    if (reason === 'too_large') return `This request alone is larger than ${what[blocker].replace(' is reached', '')}; it can never be served here: shorten the prompt or lower max_tokens.`;
    return `Too many requests in flight: ${what[blocker]} and the wait queue is full; retry shortly.`;
  }
}
