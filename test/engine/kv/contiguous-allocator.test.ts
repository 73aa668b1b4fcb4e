import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { ContiguousAllocator, type Slab } from '../../../src/engine/kv/contiguous-allocator.ts';
import { Coverage, propertyParams } from './property-support.ts';

describe('ContiguousAllocator', () => {
  it('validates its options', () => {
    assert.throws(() => new ContiguousAllocator({ numCells: 0, maxOutputTokens: 4 }), /expected numCells to be a positive integer, got 0/);
    assert.throws(() => new ContiguousAllocator({ numCells: 8, maxOutputTokens: -1 }), /expected maxOutputTokens to be a non-negative integer, got -1/);
  });

  it('reserves prompt + output cap first fit, coalesces on free, and measures fragmentation', () => {
    const a = new ContiguousAllocator({ numCells: 100, maxOutputTokens: 10 });
    const s1 = a.allocate(10); // [0, 20)
    const s2 = a.allocate(20); // [20, 50)
    const s3 = a.allocate(5); //  [50, 65)
    assert.deepEqual([s1, s2, s3], [{ start: 0, numCells: 20 }, { start: 20, numCells: 30 }, { start: 50, numCells: 15 }]);
    a.free(s1);
    a.free(s3);
    assert.deepEqual(a.freeRanges(), [{ start: 0, numCells: 20 }, { start: 50, numCells: 50 }]);
    // 70 cells free, but a 40-cell request fits only the second range: 20 unusable.
    assert.equal(a.numFreeCells, 70);
    assert.equal(a.numUnusableFreeCells(40), 20);
    assert.equal(a.fragmentation(40), 20 / 70);
    assert.equal(a.canAllocate(45), false, 'slab of 55 does not fit anywhere');
    assert.deepEqual(a.allocate(5), { start: 0, numCells: 15 }, 'first fit');
    a.free({ start: 0, numCells: 15 });
    a.free(s2);
    assert.deepEqual(a.freeRanges(), [{ start: 0, numCells: 100 }], 'coalesced both ways');
    assert.throws(() => a.free(s2), /double free/);
    a.checkInvariants();
  });

  it('property: random reservations and frees tile the cells and coalesce', () => {
    const coverage = new Coverage(['exhausted', 'refused while fragmented', 'coalesced both sides']);
    const op = fc.tuple(fc.integer({ min: 0, max: 99 }), fc.nat(), fc.integer({ min: 0, max: 40 }));
    const run = fc.record({
      numCells: fc.integer({ min: 16, max: 200 }),
      maxOutputTokens: fc.integer({ min: 0, max: 24 }),
      ops: fc.array(op, { minLength: 30, maxLength: 100 }),
    });
    fc.assert(
      fc.property(run, ({ numCells, maxOutputTokens, ops }) => {
        coverage.startRun();
        const a = new ContiguousAllocator({ numCells, maxOutputTokens });
        const slabs: Slab[] = [];
        for (const [kind, i, prompt] of ops) {
          coverage.op();
          if (kind < 60 || slabs.length === 0) {
            const size = a.slabCells(prompt);
            const fits = a.freeRanges().some((r) => r.numCells >= size) && size > 0;
            assert.equal(a.canAllocate(prompt), fits);
            if (fits) {
              slabs.push(a.allocate(prompt));
            } else if (size > 0) {
              coverage.hit(a.numFreeCells >= size ? 'refused while fragmented' : 'exhausted');
              assert.equal(a.numUnusableFreeCells(size), a.numFreeCells);
            }
          } else {
            const [slab] = slabs.splice(i % slabs.length, 1);
            const before = a.freeRanges().length;
            a.free(slab!);
            if (a.freeRanges().length === before - 1) coverage.hit('coalesced both sides');
          }
          a.checkInvariants();
          assert.equal(a.numSlabs, slabs.length);
          assert.equal(a.numFreeCells, numCells - slabs.reduce((n, s) => n + s.numCells, 0));
        }
        for (const s of slabs) a.free(s);
        assert.deepEqual(a.freeRanges(), [{ start: 0, numCells }], 'nothing leaks');
        coverage.endRun();
      }),
      propertyParams(300),
    );
    coverage.reportAndAssert('contiguous allocator', 10_000);
  });
});
