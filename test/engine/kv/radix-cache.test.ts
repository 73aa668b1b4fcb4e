import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { asBlockId, BlockPool, type BlockId } from '../../../src/engine/kv/block-pool.ts';
import type { BlockTable } from '../../../src/engine/kv/block-table.ts';
import { PagedKv } from '../../../src/engine/kv/paged-kv.ts';
import { RadixCache, type CacheHandle } from '../../../src/engine/kv/radix-cache.ts';
import { SeqIdPool } from '../../../src/engine/kv/seq-id-pool.ts';
import type { SeqId } from '../../../src/engine/plan.ts';
import { propertyParams } from './property-support.ts';

const ids = (...n: number[]): BlockId[] => n.map(asBlockId);

/** Pool + tables + seq ids + cache, and the scheduler's protocol in its simplest form. */
function world(numBlocks: number, blockSize = 2, maxSequences = 4) {
  const pool = new BlockPool({ numBlocks, blockSize });
  const kv = new PagedKv({ pool });
  const seqIds = new SeqIdPool({ maxSequences });
  const cache = new RadixCache({ pool, seqIdPool: seqIds });
  const running = new Set<SeqId>();
  const check = (): void => {
    const refs = new Map<BlockId, number>();
    kv.countBlockRefs(refs);
    cache.countBlockRefs(refs);
    pool.checkInvariants(refs);
    kv.checkInvariants();
    seqIds.checkInvariants();
    cache.checkInvariants(running);
  };
  /** A request that computed `tokens` itself (no hit) and inserted them at prefill completion. */
  const prefill = (tokens: number[]): { seqId: SeqId; table: BlockTable; handle: CacheHandle; numCachedTokens: number } => {
    const seqId = seqIds.acquire();
    running.add(seqId);
    const table = kv.createTable();
    kv.append(table, tokens.length);
    const r = cache.insert(tokens, table.blocks, seqId);
    return { seqId, table, handle: r.handle, numCachedTokens: r.numCachedTokens };
  };
  /** Finish, abort and preempt all end a sequence the same way. */
  const end = (r: { seqId: SeqId; table: BlockTable; handle: CacheHandle }): boolean => {
    cache.release(r.handle);
    kv.free(r.table);
    running.delete(r.seqId);
    if (cache.ownsNodes(r.seqId)) return false;
    seqIds.release(r.seqId);
    return true;
  };
  return { pool, kv, seqIds, cache, running, check, prefill, end };
}

describe('RadixCache', () => {
  it('validates its options', () => {
    const pool = new BlockPool({ numBlocks: 2 });
    assert.throws(() => new RadixCache({ pool, seqIdPool: undefined as unknown as SeqIdPool }), /expected options.seqIdPool to be a SeqIdPool, got undefined/);
  });

  it('evicts unpinned leaves in LRU order (logical clock), frees exact blocks and releases owners', () => {
    const w = world(16);
    const a = w.prefill([1, 2, 3, 4]); // seq 0, blocks 0,1
    const b = w.prefill([5, 6]); // seq 1, block 2
    const c = w.prefill([7, 8, 9, 10]); // seq 2, blocks 3,4
    assert.deepEqual([a.table.blocks, b.table.blocks, c.table.blocks], [ids(0, 1), ids(2), ids(3, 4)]);
    for (const r of [a, b, c]) assert.equal(w.end(r), false, 'each owns its node: the cache keeps its id');
    w.check();
    const hit = w.cache.match([1, 2, 3, 4, 99]);
    assert.deepEqual(hit, { numTokens: 4, blocks: ids(0, 1), segments: [{ ownerSeqId: 0, p0: 0, p1: 4 }], handle: hit.handle });
    w.cache.release(hit.handle); // A is now the most recently used
    const e1 = w.cache.evict(1);
    assert.deepEqual(e1, {
      numBlocksFreed: 1, numNodesEvicted: 1, releasedSeqIds: [1],
      kvOps: [{ kind: 'remove', seqId: 1, p0: 0, p1: 2 }, { kind: 'remove', seqId: 1, p0: 0, p1: -1 }],
    });
    assert.deepEqual(w.pool.freeListSnapshot().slice(0, 2), ids(2, 5));
    const e2 = w.cache.evict(1);
    assert.deepEqual(e2.kvOps, [{ kind: 'remove', seqId: 2, p0: 0, p1: 4 }, { kind: 'remove', seqId: 2, p0: 0, p1: -1 }]);
    assert.equal(e2.numBlocksFreed, 2, 'a node goes whole');
    assert.deepEqual(w.pool.freeListSnapshot().slice(0, 4), ids(3, 4, 2, 5));
    const e3 = w.cache.evict(100);
    assert.deepEqual(e3.releasedSeqIds, [0]);
    assert.deepEqual(w.pool.freeListSnapshot().slice(0, 6), ids(0, 1, 3, 4, 2, 5));
    assert.equal(w.cache.numNodes, 0);
    assert.equal(w.seqIds.numFree, 4);
    assert.equal(w.cache.numEvictedNodes, 3);
    assert.equal(w.cache.numEvictedBlocks, 5);
    w.check();
  });

  it('matches only whole blocks, splits edges at block boundaries, and names the right owner', () => {
    const w = world(32);
    const a = w.prefill([1, 2, 3, 4, 5, 6, 7]); // caches 6 tokens (3 blocks): the partial block never
    assert.equal(a.numCachedTokens, 6);
    assert.equal(w.cache.peek([1, 2, 3]), 2);
    // B shares 2 blocks with A, then diverges: A's node splits; B owns the new branch only.
    const bSeq = w.seqIds.acquire();
    w.running.add(bSeq);
    const m = w.cache.match([1, 2, 3, 4, 9, 9, 9]);
    assert.deepEqual([m.numTokens, m.segments, m.blocks], [4, [{ ownerSeqId: a.seqId, p0: 0, p1: 4 }], ids(0, 1)]);
    const bTable = w.kv.createTable();
    w.kv.sharePrefix(bTable, m.blocks, m.numTokens); // + seqCopy(a → b, 0, 4) in a real plan
    w.kv.append(bTable, 3);
    w.cache.release(m.handle);
    const rb = w.cache.insert([1, 2, 3, 4, 9, 9, 9], bTable.blocks, bSeq);
    assert.deepEqual([rb.numCachedTokens, rb.numNewTokens, rb.ownsNodes], [6, 2, true]);
    assert.equal(w.cache.numEdgeSplits, 1);
    assert.equal(w.cache.numNodes, 3);
    w.check();
    const hitB = w.cache.match([1, 2, 3, 4, 9, 9, 0]);
    // Each matched node's range from its own owner: A's head, then B's branch.
    assert.deepEqual([hitB.numTokens, hitB.segments, hitB.blocks], [6, [{ ownerSeqId: a.seqId, p0: 0, p1: 4 }, { ownerSeqId: bSeq, p0: 4, p1: 6 }], ids(0, 1, 4)]);
    const hitHead = w.cache.match([1, 2, 3, 4, 0, 0, 0]);
    assert.deepEqual([hitHead.numTokens, hitHead.segments], [4, [{ ownerSeqId: a.seqId, p0: 0, p1: 4 }]], 'the split head keeps the owner of the node it came from');
    w.cache.release(hitB.handle);
    w.cache.release(hitHead.handle);
    // Inserting a strict prefix of an existing node splits it too, and adopts nothing.
    const r = w.cache.insert([1, 2], ids(0), bSeq);
    assert.deepEqual([r.numCachedTokens, r.numNewTokens, w.cache.numEdgeSplits], [2, 0, 2]);
    w.cache.release(r.handle);
    w.check();
  });

  it('pins a match: eviction between match and allocate cannot free the matched blocks (use-after-free regression)', () => {
    // 6 blocks of 2. A cached [1..4] (blocks 0,1) and finished; C cached [7,8] later (block 2).
    const w = world(6);
    w.end(w.prefill([1, 2, 3, 4, 5])); // blocks 0,1 cached; 2 freed with the table
    w.end(w.prefill([7, 8])); // block 2 again, cached
    assert.deepEqual(w.pool.freeListSnapshot(), ids(3, 4, 5));
    // B: 14 tokens → 7 blocks; 2 come from the hit, 5 more needed, 3 free: short of 2.
    const prompt = [1, 2, 3, 4, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6];
    const m = w.cache.match(prompt.slice(0, -1));
    assert.deepEqual([m.numTokens, m.blocks, m.segments], [4, ids(0, 1), [{ ownerSeqId: 0, p0: 0, p1: 4 }]]);
    const shortfall = 7 - m.blocks.length - w.pool.numFree;
    assert.equal(shortfall, 2);
    // Reclaim by LRU, as admission does. Unpinned, A's node would go second and hand blocks 0 and 1
    // back to the free list while `m.blocks` still names them. Pinned, eviction stops short.
    const ev = w.cache.evict(shortfall);
    assert.deepEqual(ev.kvOps, [{ kind: 'remove', seqId: 1, p0: 0, p1: 2 }, { kind: 'remove', seqId: 1, p0: 0, p1: -1 }], 'evicted C only');
    assert.equal(ev.numBlocksFreed, 1);
    for (const id of m.blocks) assert.equal(w.pool.refCount(id), 1, `matched block ${id} is still allocated`);
    for (const seg of m.segments) assert.ok(w.seqIds.isAcquired(seg.ownerSeqId), 'the owner to copy from is still alive');
    assert.deepEqual(w.pool.freeListSnapshot(), ids(2, 3, 4, 5), 'blocks 0 and 1 are not on the free list');
    // Whatever the decision, the matched blocks are still safe to share while pinned.
    const probe = w.kv.createTable();
    w.kv.sharePrefix(probe, m.blocks, m.numTokens); // "use after free" if eviction had taken them
    w.kv.free(probe);
    // Not enough room: B is deferred and lets go of its pin; A stays cached for its retry.
    assert.equal(w.pool.canAllocate(7 - m.blocks.length), false);
    w.cache.release(m.handle);
    assert.equal(w.cache.numProtectedBlocks, 0);
    w.check();
    const retry = w.cache.match(prompt.slice(0, -1));
    assert.equal(retry.numTokens, 4);
    w.cache.release(retry.handle);
  });

  it('stays correct when a sequence that inserted at prefill completion is preempted', () => {
    const w = world(16);
    const a = w.prefill([1, 2, 3, 4, 5]); // inserted 4 tokens, still running (decoding)
    w.kv.append(a.table, 2);
    // Pinned by its own insert handle: eviction cannot take a running sequence's nodes.
    assert.equal(w.cache.evict(100).numNodesEvicted, 0);
    // Preempt: the scheduler removes the uncached tail; the cache keeps the id as owner.
    const tail = { kind: 'remove', seqId: a.seqId, p0: a.numCachedTokens, p1: -1 } as const;
    assert.deepEqual(tail, { kind: 'remove', seqId: 0, p0: 4, p1: -1 });
    assert.equal(w.end(a), false, 'seq 0 owns a node: not released');
    assert.ok(w.seqIds.isAcquired(a.seqId));
    w.check();
    // The recomputed request hits its own prefix, copying from its old sequence.
    const m = w.cache.match([1, 2, 3, 4, 5, 6]);
    assert.deepEqual([m.numTokens, m.segments], [4, [{ ownerSeqId: a.seqId, p0: 0, p1: 4 }]]);
    w.cache.release(m.handle);
    const ev = w.cache.evict(100);
    assert.deepEqual(ev.releasedSeqIds, [a.seqId]);
    assert.equal(w.seqIds.numFree, 4);
    assert.equal(w.pool.numFree, 16);
    w.check();
  });

  it('never evicts an interior node or a pinned one; evicts a parent once its children are gone', () => {
    const w = world(16);
    const a = w.prefill([1, 2, 3, 4]);
    w.end(a);
    const b = w.prefill([1, 2, 3, 4, 5, 6]); // child of A's node, owned by seq 1
    assert.equal(w.cache.evict(100).numNodesEvicted, 0, 'B pins its path, A included');
    w.end(b);
    const ev = w.cache.evict(1);
    assert.deepEqual(ev.kvOps, [{ kind: 'remove', seqId: 1, p0: 4, p1: 6 }, { kind: 'remove', seqId: 1, p0: 0, p1: -1 }]);
    assert.deepEqual(w.cache.evict(1).releasedSeqIds, [0]);
    w.check();
  });

  it('counts hits token by token', () => {
    const w = world(16);
    w.end(w.prefill([1, 2, 3, 4]));
    w.cache.release(w.cache.match([1, 2, 3, 4, 5, 6]).handle); // 4 of 6
    w.cache.release(w.cache.match([9, 9]).handle); // 0 of 2
    assert.deepEqual([w.cache.numHitTokens, w.cache.numQueryTokens, w.cache.hitRate], [4, 8, 0.5]);
  });

  it('a partial hit on a long node pins only the matched blocks: the rest stays evictable', () => {
    const w = world(16);
    w.end(w.prefill([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12])); // one node of 6 blocks
    const m = w.cache.match([1, 2, 7, 7]);
    assert.deepEqual([m.numTokens, m.blocks], [2, ids(0)]);
    assert.equal(w.cache.numProtectedBlocks, 1, 'the node was split where the query left it');
    assert.equal(w.cache.evict(100).numBlocksFreed, 5);
    w.cache.release(m.handle);
    w.check();
  });

  it('peek answers what match would, with no LRU touch, pin or statistics', () => {
    const w = world(16);
    w.end(w.prefill([1, 2, 3, 4])); // older: evicted first
    w.end(w.prefill([5, 6, 7, 8]));
    const before = [w.cache.numQueryTokens, w.cache.numHitTokens, w.cache.numHandles, w.cache.numEvictableBlocks, w.cache.numProtectedBlocks];
    assert.equal(w.cache.peek([1, 2, 3, 4, 9]), 4);
    assert.equal(w.cache.peek([1, 2, 3]), 2, 'whole blocks only');
    assert.equal(w.cache.peek([7, 7]), 0);
    assert.deepEqual([w.cache.numQueryTokens, w.cache.numHitTokens, w.cache.numHandles, w.cache.numEvictableBlocks, w.cache.numProtectedBlocks], before);
    // Had peek touched [1, 2, 3, 4], the other prefix would be the least recently used.
    assert.deepEqual(w.cache.evict(1).kvOps[0], { kind: 'remove', seqId: 0, p0: 0, p1: 4 });
    w.check();
  });

  it('differential: match agrees with a naive list of inserted prefixes (tokens, blocks, owner)', () => {
    const bs = 2;
    const query = fc.array(fc.integer({ min: 0, max: 2 }), { maxLength: 12 });
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.boolean(), query), { minLength: 1, maxLength: 40 }), (ops) => {
        const pool = new BlockPool({ numBlocks: 400, blockSize: bs });
        const seqIds = new SeqIdPool({ maxSequences: 64 });
        const cache = new RadixCache({ pool, seqIdPool: seqIds });
        const inserted: { tokens: number[]; blocks: BlockId[]; seqId: SeqId }[] = [];
        const common = (x: readonly number[], y: readonly number[]): number => {
          let b = 0;
          while ((b + 1) * bs <= Math.min(x.length, y.length) && x.slice(b * bs, (b + 1) * bs).every((t, i) => t === y[b * bs + i])) b++;
          return b;
        };
        for (const [isInsert, tokens] of ops) {
          if (isInsert) {
            const seqId = seqIds.acquire();
            const blocks = pool.allocate(Math.ceil(tokens.length / bs));
            const r = cache.insert(tokens, blocks, seqId);
            cache.release(r.handle);
            for (const id of blocks) pool.decRef(id);
            if (!r.ownsNodes) seqIds.release(seqId);
            inserted.push({ tokens, blocks, seqId });
          } else {
            const peeked = cache.peek(tokens);
            const m = cache.match(tokens);
            cache.release(m.handle);
            assert.equal(peeked, m.numTokens, 'peek and match agree');
            const numBlocks = Math.max(0, ...inserted.map((e) => common(tokens, e.tokens)));
            assert.equal(m.numTokens, numBlocks * bs);
            // Existing nodes keep their blocks: block j comes from the first insert that reached it.
            const expected = Array.from({ length: numBlocks }, (_, j) => inserted.find((e) => common(tokens, e.tokens) > j)!.blocks[j]);
            assert.deepEqual(m.blocks, expected);
            // ... and its cells come from that insert's sequence: runs of blocks with one owner, in order.
            const segments: { ownerSeqId: number; p0: number; p1: number }[] = [];
            for (let j = 0; j < numBlocks; j++) {
              const owner = inserted.find((e) => common(tokens, e.tokens) > j)!.seqId;
              const last = segments.at(-1);
              if (last?.ownerSeqId === owner) last.p1 += bs;
              else segments.push({ ownerSeqId: owner, p0: j * bs, p1: (j + 1) * bs });
            }
            assert.deepEqual(m.segments, segments);
          }
          cache.checkInvariants([]);
        }
      }),
      propertyParams(200),
    );
  });
});
