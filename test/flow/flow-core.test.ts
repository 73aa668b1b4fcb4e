// The flow-control core against random interleavings (fast-check): arrivals of random bands,
// tenants and sizes, releases, client aborts and TTL expiries in any order. After every step the
// caps hold exactly (each started request fits its band's share, so the totals never pass a cap by
// one), the counts equal the sum of what was started and not yet released, strict band order
// holds, and nothing waits while nothing runs. Then the deterministic cases: band order, graded
// shedding, round-robin between tenants, TTL and cancel freeing queue slots.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import type { FlowCost, FlowLimits, Waiter } from '../../src/flow/flow-core.ts';
import { FlowCore, bandLimit } from '../../src/flow/flow-core.ts';

type Op =
  | { kind: 'offer'; band: number; tenant: number; input: number; output: number }
  | { kind: 'release'; pick: number }
  | { kind: 'cancel'; pick: number }
  | { kind: 'tick'; ms: number };

const opArb = (numBands: number): fc.Arbitrary<Op> =>
  fc.oneof(
    { weight: 5, arbitrary: fc.record({ kind: fc.constant('offer' as const), band: fc.integer({ min: 0, max: numBands - 1 }), tenant: fc.integer({ min: 0, max: 3 }), input: fc.integer({ min: 1, max: 60 }), output: fc.integer({ min: 0, max: 40 }) }) },
    { weight: 3, arbitrary: fc.record({ kind: fc.constant('release' as const), pick: fc.nat() }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('cancel' as const), pick: fc.nat() }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('tick' as const), ms: fc.integer({ min: 1, max: 400 }) }) },
  );

const limitsArb: fc.Arbitrary<FlowLimits> = fc
  .record({
    maxRequests: fc.oneof(fc.integer({ min: 1, max: 8 }), fc.constant(Infinity)),
    maxInputTokens: fc.oneof(fc.integer({ min: 60, max: 300 }), fc.constant(Infinity)),
    maxTotalTokens: fc.oneof(fc.integer({ min: 100, max: 400 }), fc.constant(Infinity)),
    lower: fc.array(fc.double({ min: 0.1, max: 1, noNaN: true }), { maxLength: 3 }),
    queueSize: fc.integer({ min: 0, max: 10 }),
    queueTtlMs: fc.integer({ min: 50, max: 1000 }),
  })
  .map(({ lower, ...l }) => ({ ...l, shares: [...[...lower].sort((a, b) => a - b), 1] }));

test('caps hold exactly under any interleaving of arrivals, releases, aborts and expiries; counts match; strict band order; nothing waits while nothing runs', () => {
  fc.assert(
    fc.property(limitsArb, fc.array(opArb(4), { minLength: 1, maxLength: 200 }), (limits, ops) => {
      let now = 0;
      const core = new FlowCore<number>(limits, () => now);
      const running: FlowCost[] = [];
      const waiting: Waiter<number>[] = [];
      let nextId = 0;
      const started = (ws: readonly Waiter<number>[]): void => {
        for (const w of ws) {
          assert.equal(w.state, 'granted');
          running.push(w.cost);
          waiting.splice(waiting.indexOf(w), 1);
        }
        checkStarts(ws.map((w) => w.band));
      };
      const checkStarts = (bands: readonly number[]): void => {
        const s = core.state();
        for (const band of bands) {
          const share = limits.shares[band]!;
          assert.ok(s.inFlight.requests <= bandLimit(limits.maxRequests, share), `requests ${s.inFlight.requests} over band ${band}'s cap`);
          assert.ok(s.inFlight.inputTokens <= bandLimit(limits.maxInputTokens, share), `input tokens ${s.inFlight.inputTokens} over band ${band}'s cap`);
          assert.ok(s.inFlight.totalTokens <= bandLimit(limits.maxTotalTokens, share), `total tokens ${s.inFlight.totalTokens} over band ${band}'s cap`);
          assert.equal(s.queued.slice(band + 1).reduce((a, b) => a + b, 0), 0, `band ${band} started while a higher band waits`);
        }
      };
      for (const op of ops) {
        if (op.kind === 'offer') {
          const cost = { inputTokens: op.input, totalTokens: op.input + op.output };
          const band = op.band % limits.shares.length;
          const o = core.offer(band, `t${op.tenant}`, cost, nextId++);
          if (o.kind === 'granted') {
            running.push(cost);
            checkStarts([band]);
            assert.equal(core.state().queued.slice(band).reduce((a, b) => a + b, 0), 0, `an arrival of band ${band} overtook a waiter of its band or a higher one`);
          } else if (o.kind === 'queued') waiting.push(o.waiter);
        } else if (op.kind === 'release') {
          if (running.length === 0) continue;
          const [cost] = running.splice(op.pick % running.length, 1);
          started(core.release(cost!));
        } else if (op.kind === 'cancel') {
          if (waiting.length === 0) continue;
          const w = waiting[op.pick % waiting.length]!;
          const r = core.cancel(w);
          assert.ok(r.removed);
          waiting.splice(waiting.indexOf(w), 1);
          started(r.granted);
        } else {
          now += op.ms;
          const r = core.expire();
          for (const w of r.expired) {
            assert.ok(w.deadlineMs <= now);
            waiting.splice(waiting.indexOf(w), 1);
          }
          started(r.granted);
        }
        core.checkInvariants();
        const s = core.state();
        assert.equal(s.inFlight.requests, running.length);
        assert.equal(s.inFlight.inputTokens, running.reduce((a, c) => a + c.inputTokens, 0));
        assert.equal(s.inFlight.totalTokens, running.reduce((a, c) => a + c.totalTokens, 0));
        assert.equal(s.queued.reduce((a, b) => a + b, 0), waiting.length);
        assert.ok(waiting.length <= limits.queueSize);
        if (waiting.length > 0) assert.ok(running.length > 0, 'a request waits while nothing runs');
      }
    }),
    { numRuns: 400 },
  );
});

const base: FlowLimits = { maxRequests: 4, maxInputTokens: Infinity, maxTotalTokens: Infinity, shares: [1], queueSize: 100, queueTtlMs: 1000 };
const one = { inputTokens: 1, totalTokens: 1 };

test('lower bands shed first: band 0 (share 0.5) stops at 2 of 4 slots and band 1 at 3, the top band fills all 4; a full queue refuses band 0 first', () => {
  const core = new FlowCore<null>({ ...base, shares: [0.5, 0.75, 1], queueSize: 4 }, () => 0);
  const kinds = (band: number, n: number): string[] => Array.from({ length: n }, () => core.offer(band, 'a', one, null).kind);
  assert.deepEqual(kinds(0, 3), ['granted', 'granted', 'queued']);
  assert.deepEqual(kinds(1, 2), ['granted', 'queued']);
  assert.deepEqual(kinds(2, 2), ['granted', 'queued']);
  // 3 waiting of a queue of 4: band 0 may queue only while fewer than 2 wait, band 1 fewer than 3.
  const r0 = core.offer(0, 'a', one, null);
  const r1 = core.offer(1, 'a', one, null);
  assert.deepEqual([r0.kind, r0.kind === 'refused' && r0.reason], ['refused', 'queue_full']);
  assert.deepEqual([r1.kind, r1.kind === 'refused' && r1.reason], ['refused', 'queue_full']);
  assert.equal(core.offer(2, 'a', one, null).kind, 'queued');
});

test('bands are served in strict order: released slots go to the highest waiting band first, whatever the arrival order', () => {
  const core = new FlowCore<string>({ ...base, maxRequests: 1, shares: [1, 1, 1] }, () => 0);
  assert.equal(core.offer(2, 'a', one, 'running').kind, 'granted');
  for (const [band, name] of [[0, 'low-1'], [1, 'mid-1'], [0, 'low-2'], [2, 'high-1'], [1, 'mid-2']] as const) core.offer(band, 'a', one, name);
  const order: string[] = [];
  for (let i = 0; i < 5; i++) order.push(...core.release(one).map((w) => w.payload));
  assert.deepEqual(order, ['high-1', 'mid-1', 'mid-2', 'low-1', 'low-2']);
});

test('tenants inside a band take turns: a tenant with 6 waiting and one with 2 alternate until the second runs out', () => {
  const core = new FlowCore<string>({ ...base, maxRequests: 1 }, () => 0);
  core.offer(0, 'heavy', one, 'first');
  for (let i = 0; i < 6; i++) core.offer(0, 'heavy', one, `heavy-${i}`);
  for (let i = 0; i < 2; i++) core.offer(0, 'light', one, `light-${i}`);
  const order: string[] = [];
  for (let i = 0; i < 8; i++) order.push(...core.release(one).map((w) => w.payload));
  assert.deepEqual(order, ['heavy-0', 'light-0', 'heavy-1', 'light-1', 'heavy-2', 'heavy-3', 'heavy-4', 'heavy-5']);
});

test('an expired or cancelled waiter frees its queue slot and never takes a run slot', () => {
  let now = 0;
  const core = new FlowCore<string>({ ...base, maxRequests: 1, queueSize: 2, queueTtlMs: 100 }, () => now);
  core.offer(0, 'a', one, 'running');
  const a = core.offer(0, 'a', one, 'a');
  const b = core.offer(0, 'b', one, 'b');
  assert.equal(core.offer(0, 'c', one, 'c').kind, 'refused');
  assert.ok(a.kind === 'queued' && b.kind === 'queued');
  assert.ok(core.cancel(a.waiter).removed);
  assert.equal(core.offer(0, 'c', one, 'c').kind, 'queued', 'the cancelled waiter freed its queue slot');
  now = 100;
  assert.deepEqual(core.expire().expired.map((w) => w.payload), ['b', 'c']);
  assert.deepEqual(core.state().queued, [0]);
  assert.deepEqual(core.release(one), [], 'nobody left to start');
  assert.equal(core.state().inFlight.requests, 0);
  core.checkInvariants();
});

test('a request larger than its band can ever hold is refused at once (too_large), not queued forever', () => {
  const core = new FlowCore<null>({ ...base, maxInputTokens: 100, shares: [0.5, 1] }, () => 0);
  const o = core.offer(0, 'a', { inputTokens: 60, totalTokens: 60 }, null);
  assert.deepEqual([o.kind, o.kind === 'refused' && o.reason], ['refused', 'too_large']);
  assert.equal(core.offer(1, 'a', { inputTokens: 60, totalTokens: 60 }, null).kind, 'granted');
});

test('Retry-After is the time for the waiters ahead (and this one) to drain at the measured release rate, within [1, 600] s', () => {
  let now = 0;
  const core = new FlowCore<null>({ ...base, maxRequests: 1, queueSize: 5 }, () => now);
  assert.equal(core.retryAfterS(0), null, 'no release measured yet: the server default');
  // One release every 2 s: 0.5 per second.
  for (let i = 0; i < 10; i++) {
    core.offer(0, 'a', one, null);
    now += 2000;
    core.release(one);
  }
  core.offer(0, 'a', one, null); // running
  for (let i = 0; i < 5; i++) core.offer(0, 'a', one, null); // 5 waiting: the queue is full
  const r = core.offer(0, 'a', one, null);
  assert.ok(r.kind === 'refused');
  // 10 releases over the 18 s since the oldest (at 2 s; now 20 s): 0.56/s; 5 ahead + this one = 6 releases = 10.8 s, rounded up.
  assert.equal(r.retryAfterS, 11);
  now += 1_000_000; // a long stall lowers the rate: the bound caps the wait
  assert.equal(core.retryAfterS(0), 600);
});
