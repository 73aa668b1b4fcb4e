import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { SeqIdPool } from '../../../src/engine/kv/seq-id-pool.ts';
import type { SeqId } from '../../../src/engine/plan.ts';
import { propertyParams } from './property-support.ts';

describe('SeqIdPool', () => {
  it('validates its options', () => {
    assert.throws(() => new SeqIdPool({ maxSequences: 0 }), /expected maxSequences to be a positive integer, got 0/);
  });

  it('hands out 0, 1, ... and reuses the id released last', () => {
    const p = new SeqIdPool({ maxSequences: 3 });
    assert.deepEqual([p.acquire(), p.acquire()], [0, 1]);
    p.release(0 as SeqId);
    assert.equal(p.acquire(), 0);
    assert.equal(p.acquire(), 2);
    assert.equal(p.canAcquire(), false);
    assert.throws(() => p.acquire(), /check canAcquire first/);
    p.release(1 as SeqId);
    assert.throws(() => p.release(1 as SeqId), /double release/);
    assert.throws(() => p.isAcquired(3 as SeqId), /out of range/);
    p.checkInvariants();
  });

  it('property: acquire/release never loses or duplicates an id', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 16 }), fc.array(fc.tuple(fc.boolean(), fc.nat()), { maxLength: 60 }), (max, ops) => {
        const p = new SeqIdPool({ maxSequences: max });
        const held: SeqId[] = [];
        for (const [acquire, i] of ops) {
          if (acquire && p.canAcquire()) {
            const id = p.acquire();
            assert.ok(!held.includes(id));
            held.push(id);
          } else if (held.length > 0) {
            p.release(held.splice(i % held.length, 1)[0]!);
          }
          p.checkInvariants();
          assert.equal(p.numFree + held.length, max);
        }
      }),
      propertyParams(100),
    );
  });
});
