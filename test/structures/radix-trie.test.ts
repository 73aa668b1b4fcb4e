import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { RadixTrie, type TrieNode } from '../../src/structures/radix-trie.ts';

/** A value that knows which units it covers: [first unit index, number of units]. Splits must keep it exact. */
type Span = readonly [number, number];
const splitSpan = (v: Span, n: number): readonly [Span, Span] => [[v[0], n], [v[0] + n, v[1] - n]];

/** Insert as a caching layer would: walk, split where the query leaves a node, add the rest as a leaf. */
function insert(trie: RadixTrie<Span>, tokens: readonly number[]): void {
  const u = trie.unit;
  const numUnits = Math.floor(tokens.length / u);
  const w = trie.walk(tokens);
  let node: TrieNode<Span> = w.path.at(-1) ?? trie.root;
  if (node !== trie.root && w.numUnitsInLast * u < node.key.length) node = trie.split(node, w.numUnitsInLast);
  if (w.numTokens < numUnits * u) trie.addLeaf(node, tokens.slice(w.numTokens, numUnits * u), [w.numTokens / u, numUnits - w.numTokens / u]);
}

describe('RadixTrie', () => {
  it('validates its options', () => {
    assert.throws(() => new RadixTrie({ unit: 0, rootValue: null, splitValue: () => [null, null] }), /expected unit to be a positive integer, got 0/);
    assert.throws(() => new RadixTrie({ unit: 2, rootValue: null, splitValue: undefined as never }), /expected splitValue to be a function, got undefined/);
  });

  it('walks whole units, splits an edge with its value, removes leaves', () => {
    const trie = new RadixTrie<Span>({ unit: 2, rootValue: [0, 0], splitValue: splitSpan });
    insert(trie, [1, 2, 3, 4, 5, 6, 7]); // 3 units; the odd token is never stored
    assert.deepEqual(trie.walk([1, 2, 3, 9]), { numTokens: 2, path: [...trie.root.children.values()], numUnitsInLast: 1 });
    assert.equal(trie.numNodes, 1);
    insert(trie, [1, 2, 3, 4, 8, 8]);
    assert.equal(trie.numNodes, 3, 'split into [1 2 3 4] + [5 6], plus the new [8 8]');
    const head = trie.root.children.get('1,2,')!;
    assert.deepEqual([head.key, head.value, head.startToken], [[1, 2, 3, 4], [0, 2], 0]);
    const tail = head.children.get('5,6,')!;
    assert.deepEqual([tail.key, tail.value, tail.startToken], [[5, 6], [2, 1], 4]);
    assert.throws(() => trie.removeLeaf(head), /not a live leaf/);
    assert.equal(trie.removeLeaf(tail), head);
    assert.equal(trie.walk([1, 2, 3, 4, 5, 6]).numTokens, 4);
    trie.checkInvariants();
  });

  it('property: walk agrees with a naive list of inserted keys, and every value covers exactly its units', () => {
    const u = 2;
    const query = fc.array(fc.integer({ min: 0, max: 2 }), { maxLength: 12 });
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.boolean(), query), { minLength: 1, maxLength: 40 }), (ops) => {
        const trie = new RadixTrie<Span>({ unit: u, rootValue: [0, 0], splitValue: splitSpan });
        const inserted: number[][] = [];
        const common = (x: readonly number[], y: readonly number[]): number => {
          let b = 0;
          while ((b + 1) * u <= Math.min(x.length, y.length) && x.slice(b * u, (b + 1) * u).every((t, i) => t === y[b * u + i])) b++;
          return b;
        };
        for (const [isInsert, tokens] of ops) {
          if (isInsert) {
            insert(trie, tokens);
            inserted.push(tokens);
          }
          assert.equal(trie.walk(tokens).numTokens, Math.max(0, ...inserted.map((e) => common(tokens, e))) * u);
          trie.checkInvariants();
          for (const n of trie.nodes()) assert.deepEqual(n.value, [n.startToken / u, n.key.length / u]);
        }
      }),
      { numRuns: 200 },
    );
  });
});
