import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { BinaryHeap } from '../../src/structures/binary-heap.ts';

interface Item { readonly key: number; readonly id: number }
const less = (a: Item, b: Item): boolean => a.key < b.key || (a.key === b.key && a.id < b.id);
const sorted = (xs: readonly Item[]): Item[] => [...xs].sort((a, b) => a.key - b.key || a.id - b.id);

describe('BinaryHeap', () => {
  it('validates its comparison', () => {
    assert.throws(() => new BinaryHeap(undefined as unknown as (a: number, b: number) => boolean), /expected a comparison function, got undefined/);
  });

  it('property: pops in order after any mix of push, pop and removeWhere', () => {
    const op = fc.oneof(fc.record({ push: fc.integer({ min: 0, max: 20 }) }), fc.constant({ pop: true }), fc.record({ removeMod: fc.integer({ min: 2, max: 5 }) }));
    fc.assert(
      fc.property(fc.array(op, { maxLength: 200 }), (ops) => {
        const heap = new BinaryHeap<Item>(less);
        let model: Item[] = [];
        let id = 0;
        for (const o of ops) {
          if ('push' in o) {
            const item = { key: o.push, id: id++ };
            heap.push(item);
            model.push(item);
          } else if ('pop' in o) {
            const want = sorted(model)[0];
            assert.equal(heap.peek(), want);
            assert.equal(heap.pop(), want);
            model = model.filter((x) => x !== want);
          } else {
            const pred = (x: Item): boolean => x.key % o.removeMod === 0;
            assert.deepEqual(sorted(heap.removeWhere(pred)), sorted(model.filter(pred)));
            model = model.filter((x) => !pred(x));
          }
          assert.equal(heap.size, model.length);
        }
        const drained: Item[] = [];
        for (let x = heap.pop(); x !== undefined; x = heap.pop()) drained.push(x);
        assert.deepEqual(drained, sorted(model));
      }),
      { numRuns: 300 },
    );
  });
});
