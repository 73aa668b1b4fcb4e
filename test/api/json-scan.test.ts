// topLevelArrayLength reads body[key].length from the bytes exactly as JSON.parse would see it.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { topLevelArrayLength } from '../../src/api/json-scan.ts';

const scan = (o: unknown): number | null => topLevelArrayLength(Buffer.from(JSON.stringify(o)), 'messages');

test('counts the top-level array on random bodies, and finds nothing where there is none', () => {
  fc.assert(
    fc.property(fc.object(), fc.array(fc.jsonValue()), (o, arr) => {
      assert.equal(scan({ ...o, messages: arr }), arr.length);
      const rest: Record<string, unknown> = { ...o };
      delete rest['messages'];
      assert.equal(scan(rest), null);
      assert.equal(scan([{ messages: arr }]), null);
      assert.equal(scan({ nested: { messages: arr } }), null);
    }),
    { numRuns: 3000, seed: 3 },
  );
  assert.equal(scan({ messages: ['a,b', '\\"],', { x: [1, 2] }] }), 3);
  assert.equal(topLevelArrayLength(Buffer.from('{"messages":[1],"messages":[1,2]}'), 'messages'), 2, 'the last duplicate key wins');
});
