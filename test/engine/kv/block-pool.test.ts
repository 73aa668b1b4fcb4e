import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { asBlockId, BlockPool, type BlockId } from '../../../src/engine/kv/block-pool.ts';
import { numBlocksNeeded } from '../../../src/engine/kv/block-table.ts';
import { PagedKv } from '../../../src/engine/kv/paged-kv.ts';
import { Coverage, propertyParams } from './property-support.ts';

const ids = (...n: number[]): BlockId[] => n.map(asBlockId);

describe('BlockPool', () => {
  it('validates its options', () => {
    assert.throws(() => new BlockPool({ numBlocks: 0 }), /expected numBlocks to be a positive integer, got 0/);
    assert.throws(() => new BlockPool({ numBlocks: 4, blockSize: 1.5 }), /expected blockSize to be a positive integer, got 1.5/);
    assert.equal(new BlockPool({ numBlocks: 4 }).blockSize, 16);
  });

  it('hands out 0, 1, 2, ... and reuses the block freed last (LIFO)', () => {
    const pool = new BlockPool({ numBlocks: 6, blockSize: 4 });
    assert.deepEqual(pool.allocate(3), ids(0, 1, 2));
    assert.deepEqual(pool.freeListSnapshot(), ids(3, 4, 5));
    assert.equal(pool.decRef(asBlockId(1)), true);
    assert.equal(pool.decRef(asBlockId(0)), true);
    assert.deepEqual(pool.freeListSnapshot(), ids(0, 1, 3, 4, 5));
    assert.deepEqual(pool.allocate(2), ids(0, 1));
    assert.equal(pool.numFree, 3);
    assert.equal(pool.numAllocations, 5);
    pool.checkInvariants();
  });

  it('frees a shared block only at the last reference, and refuses use after free', () => {
    const pool = new BlockPool({ numBlocks: 2, blockSize: 4 });
    const [b] = pool.allocate(1);
    pool.incRef(b!);
    assert.equal(pool.refCount(b!), 2);
    assert.equal(pool.decRef(b!), false);
    assert.equal(pool.decRef(b!), true);
    assert.throws(() => pool.decRef(b!), /double free/);
    assert.throws(() => pool.incRef(b!), /use after free/);
    assert.throws(() => pool.allocate(3), /check canAllocate first/);
    assert.equal(pool.canAllocate(3), false);
  });
});

describe('PagedKv', () => {
  it('appends block by block and frees the table last block first', () => {
    const pool = new BlockPool({ numBlocks: 8, blockSize: 4 });
    const kv = new PagedKv({ pool });
    const t = kv.createTable();
    assert.equal(kv.numBlocksToAppend(t, 9), 3);
    kv.append(t, 9);
    assert.deepEqual(t.blocks, ids(0, 1, 2));
    kv.append(t, 3); // fills block 2
    assert.deepEqual(t.blocks, ids(0, 1, 2));
    kv.append(t, 1);
    assert.deepEqual(t.blocks, ids(0, 1, 2, 3));
    kv.free(t);
    assert.deepEqual(pool.freeListSnapshot(), ids(0, 1, 2, 3, 4, 5, 6, 7));
    kv.append(t, 13);
    assert.deepEqual(t.blocks, ids(0, 1, 2, 3), 'a table of the same size gets the same ids back');
  });

  it('copies on write before appending to a shared, partially filled block, and counts it', () => {
    const pool = new BlockPool({ numBlocks: 8, blockSize: 4 });
    const kv = new PagedKv({ pool });
    const a = kv.createTable();
    kv.append(a, 6); // blocks 0, 1 (1 is half full)
    const b = kv.fork(a);
    assert.equal(pool.refCount(asBlockId(1)), 2);
    assert.equal(kv.numBlocksToAppend(b, 1), 1, 'the copy is counted before append');
    const r = kv.append(b, 1);
    assert.deepEqual(r.copiedOnWrite, { from: 1, to: 2 });
    assert.deepEqual(b.blocks, ids(0, 2));
    assert.deepEqual(a.blocks, ids(0, 1));
    assert.equal(pool.refCount(asBlockId(1)), 1);
    assert.equal(pool.refCount(asBlockId(0)), 2);
    assert.equal(pool.numCopyOnWrite, 1);
    // A shared full block needs no copy: appending starts a new block.
    const c = kv.fork(b);
    kv.append(c, 2);
    assert.equal(pool.numCopyOnWrite, 2, 'c shares half-full block 2');
    const d = kv.createTable();
    kv.sharePrefix(d, ids(0), 4);
    assert.equal(kv.append(d, 1).copiedOnWrite, null);
    assert.equal(pool.numCopyOnWrite, 2);
  });

  it('refuses an append it cannot cover, copy-on-write block included', () => {
    const pool = new BlockPool({ numBlocks: 2, blockSize: 4 });
    const kv = new PagedKv({ pool });
    const a = kv.createTable();
    kv.append(a, 2);
    const b = kv.fork(a);
    kv.append(a, 1); // copy → block 1; pool now empty
    assert.equal(pool.numFree, 0);
    assert.equal(kv.canAppend(b, 1), true, 'b is the only holder of block 0 now');
    const c = kv.fork(b);
    assert.equal(kv.canAppend(c, 1), false, 'needs a copy and no block is free');
    assert.throws(() => kv.append(c, 1), /check canAppend first/);
  });

  it('property: random tables, forks, appends and frees keep the pool consistent and never write a shared block', () => {
    const coverage = new Coverage(['copy-on-write', 'pool exhausted', 'fork', 'block reused']);
    const op = fc.tuple(fc.integer({ min: 0, max: 99 }), fc.nat(), fc.integer({ min: 0, max: 9 }));
    const run = fc.record({
      numBlocks: fc.integer({ min: 2, max: 24 }),
      blockSize: fc.integer({ min: 1, max: 5 }),
      ops: fc.array(op, { minLength: 30, maxLength: 100 }),
    });
    fc.assert(
      fc.property(run, ({ numBlocks, blockSize, ops }) => {
        coverage.startRun();
        const pool = new BlockPool({ numBlocks, blockSize });
        const kv = new PagedKv({ pool });
        // What each table should read back, and what each block holds (token per slot).
        const tables: { t: ReturnType<PagedKv['createTable']>; tokens: number[] }[] = [];
        const content = new Map<BlockId, number[]>();
        let freedAny = false;
        let nextToken = 1;
        const appendTo = (entry: (typeof tables)[number], n: number): boolean => {
          if (!kv.canAppend(entry.t, n)) {
            coverage.hit('pool exhausted');
            assert.ok(kv.numBlocksToAppend(entry.t, n) > pool.numFree);
            return false;
          }
          const before = pool.numFree;
          const r = kv.append(entry.t, n);
          assert.equal(before - pool.numFree, r.numNewBlocks);
          if (r.numNewBlocks > 0 && freedAny) coverage.hit('block reused');
          if (r.copiedOnWrite !== null) {
            coverage.hit('copy-on-write');
            content.set(r.copiedOnWrite.to, (content.get(r.copiedOnWrite.from) ?? []).slice());
          }
          for (let i = 0; i < n; i++) {
            const pos = entry.tokens.length;
            const block = entry.t.blocks[Math.floor(pos / blockSize)]!;
            assert.equal(pool.refCount(block), 1, `wrote into shared block ${block}`);
            const slots = pos % blockSize === 0 ? [] : (content.get(block) ?? []);
            slots[pos % blockSize] = nextToken;
            content.set(block, slots);
            entry.tokens.push(nextToken++);
          }
          return true;
        };
        for (const [kind, a, n] of ops) {
          coverage.op();
          const entry = tables[a % Math.max(1, tables.length)];
          if (kind < 25 || entry === undefined) {
            const e = { t: kv.createTable(), tokens: [] as number[] };
            if (appendTo(e, n + 1)) tables.push(e);
          } else if (kind < 60) {
            appendTo(entry, n);
          } else if (kind < 75) {
            coverage.hit('fork');
            tables.push({ t: kv.fork(entry.t), tokens: entry.tokens.slice() });
          } else {
            const before = pool.numFree;
            kv.free(entry.t);
            freedAny ||= pool.numFree > before;
            tables.splice(tables.indexOf(entry), 1);
          }
          kv.checkInvariants();
          const refs = new Map<BlockId, number>();
          kv.countBlockRefs(refs);
          pool.checkInvariants(refs);
          for (const e of tables) {
            assert.equal(e.t.numTokens, e.tokens.length);
            assert.equal(e.t.blocks.length, numBlocksNeeded(e.tokens.length, blockSize));
            const read = e.tokens.map((_, p) => content.get(e.t.blocks[Math.floor(p / blockSize)]!)![p % blockSize]);
            assert.deepEqual(read, e.tokens, 'a table reads back exactly what it wrote');
          }
        }
        for (const e of tables) kv.free(e.t);
        assert.equal(pool.numFree, numBlocks, 'nothing leaks');
        pool.checkInvariants(new Map());
        coverage.endRun();
      }),
      propertyParams(400),
    );
    coverage.reportAndAssert('block pool + tables', 10_000);
  });
});
