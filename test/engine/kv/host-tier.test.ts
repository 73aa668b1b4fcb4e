// The host tier's index (src/engine/kv/host-tier.ts): the longest block-aligned prefix an entry
// holds, checked token by token; a sequence an entry already holds is not saved again; an entry a
// new one extends is dropped; capacity in tokens, least recently used first.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { HostTier } from '../../../src/engine/kv/host-tier.ts';

const seq = (start: number, n: number): number[] => Array.from({ length: n }, (_, i) => start + i);

test('host tier: match finds the longest block-aligned shared prefix, and only a real one', () => {
  const t = new HostTier({ blockSize: 4, capacityTokens: 1000, minTokens: 8 });
  assert.equal(t.match(seq(0, 40), 40), null, 'empty');
  const a = t.add(seq(0, 30))!;
  assert.deepEqual(a.dropped, []);
  // Shares 21 tokens: 5 whole blocks.
  const m = t.match([...seq(0, 21), 999, 998, 997, 996], 25)!;
  assert.deepEqual(m, { key: a.key, numTokens: 20, numEntryTokens: 30 });
  // The limit bounds the match (the last prompt token is never looked up).
  assert.equal(t.match(seq(0, 30), 13)!.numTokens, 12);
  assert.equal(t.match([5, 6, 7, 8, 9, 10, 11, 12], 8), null, 'a different first block');
  assert.equal(t.match(seq(0, 3), 3), null, 'shorter than a block');
  t.used(m);
  assert.equal(t.numLoads, 1);
  assert.equal(t.numHitTokens, 20);
  t.checkInvariants();
});

test('host tier: what an entry holds is not saved twice; an entry the new one extends is dropped', () => {
  const t = new HostTier({ blockSize: 4, capacityTokens: 1000, minTokens: 8 });
  const turn1 = t.add(seq(0, 20))!;
  assert.equal(t.add(seq(0, 16)), null, 'a prefix of an entry');
  assert.equal(t.add(seq(0, 20)), null, 'the same sequence');
  assert.equal(t.add(seq(0, 6)), null, 'shorter than minTokens');
  const turn2 = t.add(seq(0, 36))!;
  assert.deepEqual(turn2.dropped, [turn1.key], 'the next turn extends the last one');
  assert.equal(t.numEntries, 1);
  assert.equal(t.numTokens, 36);
  assert.equal(t.match(seq(0, 40), 39)!.key, turn2.key);
  t.checkInvariants();
});

test('host tier: over capacity the least recently used entries go, a use counting as recent', () => {
  const t = new HostTier({ blockSize: 4, capacityTokens: 64, minTokens: 8 });
  t.add(seq(100, 24));
  const b = t.add(seq(200, 24))!;
  t.used(t.match(seq(100, 24), 23)!); // a is now more recent than b
  const c = t.add(seq(300, 24))!;
  assert.deepEqual(c.dropped, [b.key]);
  assert.ok(t.match(seq(100, 24), 23) !== null && t.match(seq(200, 24), 23) === null && t.match(seq(300, 24), 23) !== null);
  assert.equal(t.add(seq(400, 65)), null, 'longer than the whole capacity');
  assert.equal(t.numTokens, 48);
  t.checkInvariants();
});
