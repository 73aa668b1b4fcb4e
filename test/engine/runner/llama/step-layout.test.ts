// The llama runner's row layout (step-layout.ts): which steps are cut into two llama_decode calls,
// and how the rows are ordered. Pure; no model.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { FA_TILE_ROWS, splitLayout } from '../../../../src/engine/runner/llama/step-layout.ts';

test('a decoding row beside a prompt chunk of 64 rows or more in all: the single rows first, one call each group', () => {
  const l = splitLayout([255, 1, 40, 1, 0]);
  assert.ok(l !== null);
  assert.deepEqual(l.order, [1, 3, 0, 2, 4]);
  assert.deepEqual([...l.segmentEnds], [2, 297]);
});

test('one call: under 64 rows, only decoding rows, or only chunks', () => {
  assert.equal(splitLayout([62, 1]), null, '63 rows run the row-at-a-time kernel');
  assert.notEqual(splitLayout([63, 1]), null, '64 rows run the tiled kernel');
  assert.equal(splitLayout(Array.from({ length: 80 }, () => 1)), null);
  assert.equal(splitLayout([128, 128]), null);
});

test('property: the order is a permutation that keeps each group in plan order, and segments cover every row', () => {
  fc.assert(
    fc.property(fc.array(fc.oneof(fc.constant(1), fc.integer({ min: 0, max: 300 })), { maxLength: 12 }), (lengths) => {
      const layout = splitLayout(lengths);
      const numRows = lengths.reduce((a, n) => a + n, 0);
      const cut = numRows >= FA_TILE_ROWS && lengths.includes(1) && lengths.some((n) => n > 1);
      assert.equal(layout !== null, cut);
      if (layout === null) return;
      const { order, segmentEnds } = layout;
      assert.deepEqual([...order].sort((a, b) => a - b), lengths.map((_, i) => i));
      const singles = order.filter((i) => lengths[i] === 1);
      assert.deepEqual(order.slice(0, singles.length), singles);
      assert.deepEqual(singles, [...singles].sort((a, b) => a - b));
      const rest = order.slice(singles.length);
      assert.deepEqual(rest, [...rest].sort((a, b) => a - b));
      assert.deepEqual([...segmentEnds], [singles.length, numRows]);
      assert.ok(singles.length > 0 && singles.length < numRows);
    }),
    { numRuns: 500 },
  );
});
