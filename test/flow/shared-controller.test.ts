// SharedFlowController against an in-memory store that follows the Redis script's contract (no
// leases: these tests are about the controller): leaving while waiting for a shared reservation
// (client gone, TTL, no queue), band order in the batch, a reservation granted to a request that
// left meanwhile given back, the fallback's share and its switch back, and a seeded random run
// where the replicas' holdings always agree with the tickets out and never pass the cap.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import type { FlowRequest, FlowResult, FlowTicket } from '../../src/flow/flow-control.ts';
import type { FlowLimits } from '../../src/flow/flow-core.ts';
import { SharedFlowController } from '../../src/flow/shared-flow-controller.ts';
import type { FlowCounts, Reservation, SyncResult } from '../../src/flow/shared-script.ts';
import type { SharedStore } from '../../src/flow/shared-store.ts';

/** The script's rules over a Map shared by the stores of several replicas. */
class MemoryStore implements SharedStore {
  readonly replicaId: string;
  readonly #state: Map<string, FlowCounts>;
  /** Calls fail (Redis down) while set. */
  down = false;
  numCalls = 0;

  constructor(state: Map<string, FlowCounts>, id: string) {
    this.#state = state;
    this.replicaId = id;
  }

  async sync(held: FlowCounts, batch: readonly Reservation[]): Promise<SyncResult> {
    this.numCalls++;
    await new Promise((r) => setImmediate(r));
    if (this.down) throw new Error('connect ECONNREFUSED (memory store down)');
    let [r, i, o] = [held.requests, held.inputTokens, held.totalTokens];
    for (const [id, c] of this.#state) if (id !== this.replicaId) [r, i, o] = [r + c.requests, i + c.inputTokens, o + c.totalTokens];
    const mine = { ...held };
    let n = 0;
    for (const b of batch) {
      if (r + 1 > b.maxRequests || i + b.inputTokens > b.maxInputTokens || o + b.totalTokens > b.maxTotalTokens) break;
      [r, i, o] = [r + 1, i + b.inputTokens, o + b.totalTokens];
      mine.requests++;
      mine.inputTokens += b.inputTokens;
      mine.totalTokens += b.totalTokens;
      n++;
    }
    this.#state.set(this.replicaId, mine);
    return { numGranted: n, total: { requests: r, inputTokens: i, totalTokens: o }, numReplicas: this.#state.size };
  }

  close(): Promise<void> {
    this.#state.delete(this.replicaId);
    return Promise.resolve();
  }
}

const BASE: FlowLimits = { maxRequests: 4, maxInputTokens: Infinity, maxTotalTokens: Infinity, shares: [1], queueSize: 100, queueTtlMs: 60_000 };

function pair(limits: Partial<FlowLimits> = {}, replicas = 2): { state: Map<string, FlowCounts>; stores: MemoryStore[]; flows: SharedFlowController[] } {
  const state = new Map<string, FlowCounts>();
  const stores = [new MemoryStore(state, 'a'), new MemoryStore(state, 'b')];
  const flows = stores.map((s) => new SharedFlowController({ ...BASE, ...limits }, s, { replicas, leaseMs: 3000, pollMs: 1 }));
  return { state, stores, flows };
}

// The controller's timers are unref'd (they never keep a server alive); here nothing else would.
const keepAlive = setInterval(() => undefined, 1000);
test.after(() => clearInterval(keepAlive));

const req = (band = 0, inputTokens = 1): FlowRequest => ({ caller: { tenant: 'default', role: 'user' }, band, inputTokens, totalTokens: inputTokens });
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function ok(p: Promise<FlowResult>): Promise<FlowTicket> {
  const r = await p;
  if (!r.ok) throw new Error(`expected a ticket, got ${r.refusal.message}`);
  return r.ticket;
}

async function settled(flows: readonly SharedFlowController[]): Promise<void> {
  while (!flows.every((f) => f.state().shared?.mode === 'redis')) await sleep(1);
}

test('a request waiting for a shared reservation leaves when its client does: refused, its local slot back, nothing held', async () => {
  const { flows } = pair();
  const [a, b] = flows as [SharedFlowController, SharedFlowController];
  await settled(flows);
  const held = await Promise.all([0, 1, 2, 3].map(() => ok(a.acquire(req(), new AbortController().signal))));
  const ac = new AbortController();
  const waiting = b.acquire(req(), ac.signal);
  await sleep(10);
  assert.equal(b.state().shared?.waitingGlobal, 1);
  assert.equal(b.state().inFlight.requests, 1, 'it holds its local slot while it waits');
  ac.abort();
  const r = await waiting;
  assert.equal(r.ok, false);
  assert.equal(b.state().inFlight.requests, 0);
  assert.deepEqual(b.state().shared?.held, { requests: 0, inputTokens: 0, totalTokens: 0 });
  held.forEach((t) => t.release());
  await Promise.all(flows.map((f) => f.close()));
});

test('a reservation granted to a request whose client left while its sync was in flight is given back', async () => {
  const { flows, state } = pair();
  const [a] = flows as [SharedFlowController];
  await settled(flows);
  const ac = new AbortController();
  const p = a.acquire(req(), ac.signal);
  assert.equal(a.state().shared?.waitingGlobal, 1, 'its sync is in flight');
  ac.abort();
  assert.equal((await p).ok, false);
  await sleep(20);
  assert.deepEqual(a.state().shared?.held, { requests: 0, inputTokens: 0, totalTokens: 0 });
  assert.equal(state.get('a')?.requests, 0, 'the shared state no longer counts it');
  const all = await Promise.all([0, 1, 2, 3].map(() => ok(a.acquire(req(), new AbortController().signal))));
  all.forEach((t) => t.release());
  await Promise.all(flows.map((f) => f.close()));
});

test('the TTL counts from acquire: a request waiting for a shared reservation past it is a 429 queue_ttl', async () => {
  const { flows } = pair({ queueTtlMs: 50 });
  const [a, b] = flows as [SharedFlowController, SharedFlowController];
  await settled(flows);
  const decisions: string[] = [];
  b.onDecision((_band, _tenant, d) => decisions.push(d));
  const held = await Promise.all([0, 1, 2, 3].map(() => ok(a.acquire(req(), new AbortController().signal))));
  const r = await b.acquire(req(), new AbortController().signal);
  assert.equal(r.ok, false);
  if (!r.ok) assert.match(r.refusal.message, /across the gateway replicas/);
  assert.deepEqual(decisions, ['queue_ttl']);
  assert.equal(b.state().inFlight.requests, 0);
  held.forEach((t) => t.release());
  await Promise.all(flows.map((f) => f.close()));
});

test('with no queue, a request the shared caps cannot take now is refused at once (429), as a local cap would', async () => {
  const { flows } = pair({ queueSize: 0 });
  const [a, b] = flows as [SharedFlowController, SharedFlowController];
  await settled(flows);
  const held = await Promise.all([0, 1, 2, 3].map(() => ok(a.acquire(req(), new AbortController().signal))));
  const r = await b.acquire(req(), new AbortController().signal);
  assert.equal(r.ok, false);
  if (!r.ok) assert.equal(r.refusal.reason, 'flow_cap');
  held.forEach((t) => t.release());
  // Another replica sees a release once its replica has synced (a round trip later).
  await sleep(20);
  const again = await b.acquire(req(), new AbortController().signal);
  assert.ok(again.ok, 'after the releases the cap has room');
  if (again.ok) again.ticket.release();
  await Promise.all(flows.map((f) => f.close()));
});

test('the batch is served highest band first: when a slot frees, the band-1 waiter gets it before an earlier band-0 one', async () => {
  const { flows } = pair({ shares: [1, 1] });
  const [a, b] = flows as [SharedFlowController, SharedFlowController];
  await settled(flows);
  const held = await Promise.all([0, 1, 2, 3].map(() => ok(a.acquire(req(1), new AbortController().signal))));
  const order: number[] = [];
  const low = b.acquire(req(0), new AbortController().signal).then((r) => (order.push(0), r));
  await sleep(5);
  const high = b.acquire(req(1), new AbortController().signal).then((r) => (order.push(1), r));
  await sleep(5);
  held[0]!.release();
  const first = await Promise.race([low, high]);
  assert.ok(first.ok);
  assert.deepEqual(order, [1]);
  held[1]!.release();
  const second = await low;
  assert.ok(second.ok);
  for (const r of [first, second]) if (r.ok) r.ticket.release();
  held.slice(2).forEach((t) => t.release());
  await Promise.all(flows.map((f) => f.close()));
});

test('store down: the fallback serves ⌊4 / 2⌋ = 2, counts one fallback, and the store back turns it shared again', async () => {
  const { stores, flows, state } = pair();
  const [a] = flows as [SharedFlowController];
  await settled(flows);
  stores[0]!.down = true;
  const t1 = await ok(a.acquire(req(), new AbortController().signal));
  const t2 = await ok(a.acquire(req(), new AbortController().signal));
  const third = a.acquire(req(), new AbortController().signal);
  await sleep(20);
  const s = a.state().shared!;
  assert.equal(s.mode, 'local-fallback');
  assert.equal(s.fallbacks, 1);
  assert.match(s.lastError ?? '', /ECONNREFUSED/);
  assert.equal(s.waitingGlobal, 1, 'the local share of 2 is full');
  stores[0]!.down = false;
  const t3 = await ok(third);
  assert.equal(a.state().shared?.mode, 'redis');
  assert.equal(state.get('a')?.requests, 3, 'what the fallback admitted is counted in the shared state');
  for (const t of [t1, t2, t3]) t.release();
  await Promise.all(flows.map((f) => f.close()));
});

test('--flow-replicas 0: the fallback splits the caps over the replicas last seen live', async () => {
  const { stores, flows } = pair({}, 0);
  const [a] = flows as [SharedFlowController];
  await settled(flows);
  await sleep(10);
  await ok(a.acquire(req(), new AbortController().signal)).then((t) => t.release());
  assert.equal(a.state().shared?.replicasSeen, 2);
  stores[0]!.down = true;
  const held = [await ok(a.acquire(req(), new AbortController().signal)), await ok(a.acquire(req(), new AbortController().signal))];
  const third = a.acquire(req(), new AbortController().signal);
  await sleep(20);
  assert.equal(a.state().shared?.mode, 'local-fallback');
  assert.equal(a.state().shared?.waitingGlobal, 1, '⌊4 / 2 seen⌋ = 2 are in flight: the third waits');
  stores[0]!.down = false;
  held.push(await ok(third));
  held.forEach((t) => t.release());
  await Promise.all(flows.map((f) => f.close()));
});

test('random arrivals, releases, disconnects and outages on two replicas: the shared state matches the tickets out, and never passes the cap in shared mode', async () => {
  const reached = { capInSharedMode: 0, fallback: 0, abortWhileWaitingGlobal: 0 };
  await fc.assert(
    fc.asyncProperty(fc.array(fc.tuple(fc.integer({ min: 0, max: 1 }), fc.constantFrom('acquire', 'acquire', 'release', 'abort', 'down', 'up', 'tick')), { minLength: 20, maxLength: 120 }), async (ops) => {
      const { stores, flows, state } = pair({ maxRequests: 5 });
      await settled(flows);
      const out: { replica: number; ticket: FlowTicket }[] = [];
      const waiting: { replica: number; ac: AbortController }[] = [];
      let peakShared = 0;
      for (const [replica, op] of ops) {
        const flow = flows[replica]!;
        if (op === 'acquire') {
          const ac = new AbortController();
          const w = { replica, ac };
          waiting.push(w);
          void flow.acquire(req(), ac.signal).then((r) => {
            waiting.splice(waiting.indexOf(w), 1);
            if (r.ok) out.push({ replica, ticket: r.ticket });
          });
        } else if (op === 'release') {
          const i = out.findIndex((t) => t.replica === replica);
          if (i >= 0) out.splice(i, 1)[0]!.ticket.release();
        } else if (op === 'abort') {
          const w = waiting.find((x) => x.replica === replica);
          if (w !== undefined && flow.state().shared!.waitingGlobal > 0) reached.abortWhileWaitingGlobal++;
          w?.ac.abort();
        } else if (op === 'down' || op === 'up') {
          stores[replica]!.down = op === 'down';
        }
        await sleep(op === 'tick' ? 5 : 0);
        if (flows.every((f) => f.state().shared?.mode === 'redis' && f.state().shared?.fallbacks === 0)) {
          peakShared = Math.max(peakShared, out.length);
        }
        for (const [i, f] of flows.entries()) {
          const s = f.state();
          assert.equal(s.shared!.held.requests, out.filter((t) => t.replica === i).length, 'held = tickets out');
          assert.equal(s.inFlight.requests, s.shared!.held.requests + s.shared!.waitingGlobal, 'local slots = held + waiting for a shared reservation');
        }
      }
      assert.ok(peakShared <= 5, `${peakShared} tickets out in shared mode, over the cap of 5`);
      if (peakShared === 5) reached.capInSharedMode++;
      if (flows.some((f) => f.state().shared!.fallbacks > 0)) reached.fallback++;
      for (const s of stores) s.down = false;
      for (const w of [...waiting]) w.ac.abort();
      for (const t of out.splice(0)) t.ticket.release();
      await sleep(5);
      await Promise.all(flows.map((f) => f.close()));
      assert.equal(state.size, 0);
    }),
    { numRuns: 40, seed: 16 },
  );
  // A run that never filled the cap, fell back or aborted a waiter shows nothing about those.
  for (const [what, n] of Object.entries(reached)) assert.ok(n > 0, `no run reached ${what}`);
});
