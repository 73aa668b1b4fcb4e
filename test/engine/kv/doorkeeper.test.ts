// The prefix cache's doorkeeper: the longest block-aligned prefix an earlier prompt also had.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { PrefixDoorkeeper } from '../../../src/engine/kv/doorkeeper.ts';

const seq = (start: number, n: number): number[] => Array.from({ length: n }, (_, i) => start + i);

test('a first prompt shares nothing; a later one shares the whole blocks it has in common with any earlier one', () => {
  const d = new PrefixDoorkeeper(4);
  const doc = seq(100, 12);
  assert.equal(d.sharedLength([...doc, 1, 2, 3], 15), 0);
  assert.equal(d.sharedLength([...doc, 7, 8, 9, 10, 11], 17), 12, 'the 12-token document, not the diverging tail');
  assert.equal(d.sharedLength([...doc.slice(0, 6), 50, 51, 52, 53], 10), 4, 'only whole blocks count');
  assert.equal(d.sharedLength(seq(500, 9), 9), 0);
  assert.equal(d.sharedLength([...doc, 7, 8, 9, 10], 8), 8, 'limited to the first `limit` tokens');
});

test('a prefix is matched from position 0 only, and the oldest prefixes are forgotten past the capacity', () => {
  const d = new PrefixDoorkeeper(2, 4);
  d.sharedLength([1, 2, 3, 4], 4);
  assert.equal(d.sharedLength([9, 9, 3, 4], 4), 0, 'the same block later in a prompt is another prefix');
  assert.equal(d.size, 4);
  d.sharedLength([5, 6, 7, 8], 4);
  assert.equal(d.size, 4, 'at most the capacity');
  assert.equal(d.sharedLength([1, 2], 2), 0, 'the oldest prefixes went first');
  assert.equal(d.sharedLength([5, 6, 7, 8], 4), 4, 'the newest are still there');
});
