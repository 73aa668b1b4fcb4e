// Property test of the whole KV bookkeeping as the scheduler drives it: simulated requests
// (match → allocate the rest → prefill → insert → decode → finish | abort | preempt, forks,
// evictions) against a block pool, paged tables, a seq-id pool and the radix cache. Every kvOp is
// applied to a model of llama.cpp's cells (sequence → position → token), so a wrong owner or a
// premature remove shows up as a copy of cells that are not there or hold other tokens.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { BlockPool, type BlockId } from '../../../src/engine/kv/block-pool.ts';
import { numBlocksNeeded, type BlockTable } from '../../../src/engine/kv/block-table.ts';
import { PagedKv } from '../../../src/engine/kv/paged-kv.ts';
import { RadixCache, type CacheHandle } from '../../../src/engine/kv/radix-cache.ts';
import { SeqIdPool } from '../../../src/engine/kv/seq-id-pool.ts';
import type { KvOp, SeqId } from '../../../src/engine/plan.ts';
import { Coverage, prng, propertyParams } from './property-support.ts';

interface Req {
  seqId: SeqId;
  table: BlockTable;
  tokens: number[];
  promptLen: number;
  targetLen: number;
  prefilled: boolean;
  handle: CacheHandle | null;
  numCachedTokens: number;
}

const STATES = ['prefix hit', 'peek hit', 'copy-on-write', 'eviction', 'edge split', 'pool exhausted', 'seq ids exhausted', 'owner released', 'preempted'];

class World {
  readonly pool: BlockPool;
  readonly kv: PagedKv;
  readonly seqIds: SeqIdPool;
  readonly cache: RadixCache;
  readonly running: Req[] = [];
  readonly waiting: number[][] = [];
  /** llama.cpp's cells: sequence → position → token. */
  readonly cells = new Map<SeqId, Map<number, number>>();

  constructor(numBlocks: number, readonly blockSize: number, maxSequences: number, readonly coverage: Coverage) {
    this.pool = new BlockPool({ numBlocks, blockSize });
    this.kv = new PagedKv({ pool: this.pool });
    this.seqIds = new SeqIdPool({ maxSequences });
    this.cache = new RadixCache({ pool: this.pool, seqIdPool: this.seqIds });
  }

  apply(ops: readonly KvOp[]): void {
    for (const op of ops) {
      if (op.kind === 'copy') {
        const src = this.cells.get(op.srcSeqId) ?? new Map<number, number>();
        const dst = this.#cellsOf(op.dstSeqId);
        const end = op.p1 < 0 ? Math.max(-1, ...src.keys()) + 1 : op.p1;
        for (let p = op.p0; p < end; p++) {
          const t = src.get(p);
          assert.ok(t !== undefined, `copy from seq ${op.srcSeqId} of missing cell ${p}: owner invariant broken`);
          dst.set(p, t);
        }
      } else if (op.kind === 'remove') {
        const cells = this.#cellsOf(op.seqId);
        for (const p of [...cells.keys()]) if (p >= op.p0 && (op.p1 < 0 || p < op.p1)) cells.delete(p);
      } else {
        assert.fail(`the radix cache emitted a ${op.kind} op; only the KV manager's host tier does`);
      }
    }
  }

  evict(numBlocks: number): void {
    const r = this.cache.evict(numBlocks);
    if (r.numNodesEvicted > 0) this.coverage.hit('eviction');
    if (r.releasedSeqIds.length > 0) this.coverage.hit('owner released');
    this.apply(r.kvOps);
    for (const s of r.releasedSeqIds) assert.equal(this.#cellsOf(s).size, 0, `released seq ${s} still holds cells`);
  }

  arrive(prompt: number[]): void {
    const splitsBefore = this.cache.numEdgeSplits;
    // peek is pure: same answer as match, no statistics, pins or LRU change (the heap check in
    // checkInvariants would see a touched node whose entry went stale without a push).
    const counters = (): number[] => [this.cache.numQueryTokens, this.cache.numHitTokens, this.cache.numHandles, this.cache.numEvictableBlocks, this.cache.numProtectedBlocks];
    const before = counters();
    const peeked = this.cache.peek(prompt.slice(0, -1));
    assert.deepEqual(counters(), before, 'peek changed the cache');
    if (peeked > 0) this.coverage.hit('peek hit');
    const m = this.cache.match(prompt.slice(0, -1));
    assert.equal(m.numTokens, peeked, 'peek and match disagree');
    if (m.numTokens > 0) {
      this.coverage.hit('prefix hit');
      // Each segment's owner holds its range (the hit copies each matched node from its own owner).
      let covered = 0;
      for (const seg of m.segments) {
        assert.equal(seg.p0, covered, 'segments are contiguous from position 0');
        const owner = this.cells.get(seg.ownerSeqId)!;
        for (let p = seg.p0; p < seg.p1; p++) assert.equal(owner.get(p), prompt[p], `owner ${seg.ownerSeqId} cell ${p} holds another token`);
        covered = seg.p1;
      }
      assert.equal(covered, m.numTokens, 'segments cover the match');
    }
    const needed = numBlocksNeeded(prompt.length, this.blockSize) - m.blocks.length;
    if (!this.pool.canAllocate(needed)) this.evict(needed - this.pool.numFree); // with the match pinned
    while (!this.seqIds.canAcquire() && this.cache.numEvictableBlocks > 0) this.evict(1);
    if (!this.pool.canAllocate(needed) || !this.seqIds.canAcquire()) {
      this.coverage.hit(this.pool.canAllocate(needed) ? 'seq ids exhausted' : 'pool exhausted');
      this.cache.release(m.handle);
      this.waiting.push(prompt);
      return;
    }
    for (const id of m.blocks) assert.ok(this.pool.refCount(id) > 0, 'matched block freed while pinned');
    const seqId = this.seqIds.acquire();
    assert.equal(this.#cellsOf(seqId).size, 0, `acquired seq ${seqId} is not empty`);
    this.apply(m.segments.map((seg) => ({ kind: 'copy' as const, srcSeqId: seg.ownerSeqId, dstSeqId: seqId, p0: seg.p0, p1: seg.p1 })));
    const table = this.kv.createTable();
    this.kv.sharePrefix(table, m.blocks, m.numTokens);
    this.kv.append(table, prompt.length - m.numTokens);
    this.cache.release(m.handle);
    const targetLen = prompt.length + 1 + (prompt.length % 7);
    this.running.push({ seqId, table, tokens: prompt.slice(), promptLen: prompt.length, targetLen, prefilled: false, handle: null, numCachedTokens: 0 });
    if (this.cache.numEdgeSplits > splitsBefore) this.coverage.hit('edge split');
  }

  /** One step of request `r`: its whole prefill (then insert), or one decode token. */
  step(r: Req, token: number): void {
    const cells = this.#cellsOf(r.seqId);
    if (!r.prefilled) {
      for (let p = 0; p < r.promptLen; p++) if (!cells.has(p)) cells.set(p, r.tokens[p]!);
      r.prefilled = true;
      this.#insert(r);
      return;
    }
    if (!this.kv.canAppend(r.table, 1)) this.evict(this.kv.numBlocksToAppend(r.table, 1) - this.pool.numFree);
    if (!this.kv.canAppend(r.table, 1)) {
      this.coverage.hit('preempted');
      this.end(r, false);
      this.waiting.push(r.tokens);
      return;
    }
    if (this.kv.append(r.table, 1).copiedOnWrite !== null) this.coverage.hit('copy-on-write');
    cells.set(r.tokens.length, token);
    r.tokens.push(token);
    if (r.tokens.length >= r.targetLen) this.end(r, true);
  }

  fork(r: Req): void {
    if (!r.prefilled || !this.seqIds.canAcquire()) return;
    const seqId = this.seqIds.acquire();
    this.apply([{ kind: 'copy', srcSeqId: r.seqId, dstSeqId: seqId, p0: 0, p1: -1 }]);
    const table = this.kv.fork(r.table);
    this.running.push({ ...r, seqId, table, tokens: r.tokens.slice(), handle: null, numCachedTokens: 0, targetLen: r.targetLen + 2 });
  }

  /** Finish (optionally inserting everything computed), abort or preempt: the scheduler's protocol. */
  end(r: Req, insert: boolean): void {
    if (insert && r.prefilled) this.#insert(r); // only computed tokens can be cached
    if (r.handle !== null) this.cache.release(r.handle);
    this.apply([{ kind: 'remove', seqId: r.seqId, p0: r.numCachedTokens, p1: -1 }]);
    this.kv.free(r.table);
    if (!this.cache.ownsNodes(r.seqId)) {
      this.apply([{ kind: 'remove', seqId: r.seqId, p0: 0, p1: -1 }]);
      this.seqIds.release(r.seqId);
    }
    this.running.splice(this.running.indexOf(r), 1);
  }

  check(): void {
    this.kv.checkInvariants();
    const refs = new Map<BlockId, number>();
    this.kv.countBlockRefs(refs);
    this.cache.countBlockRefs(refs);
    this.pool.checkInvariants(refs);
    this.seqIds.checkInvariants();
    this.cache.checkInvariants(this.running.map((r) => r.seqId));
    assert.equal(this.cache.numHandles, this.running.filter((r) => r.handle !== null).length, 'a pin leaked');
    for (const r of this.running) {
      const cells = this.#cellsOf(r.seqId);
      const computed = r.prefilled ? r.tokens.length : 0;
      for (let p = 0; p < computed; p++) assert.equal(cells.get(p), r.tokens[p], `seq ${r.seqId} cell ${p}`);
    }
    for (const [s, cells] of this.cells) if (cells.size > 0) assert.ok(this.seqIds.isAcquired(s), `free seq ${s} holds cells`);
  }

  #insert(r: Req): void {
    const splitsBefore = this.cache.numEdgeSplits;
    const res = this.cache.insert(r.tokens, r.table.blocks, r.seqId);
    if (r.handle !== null) this.cache.release(r.handle);
    r.handle = res.handle;
    r.numCachedTokens = res.numCachedTokens;
    if (this.cache.numEdgeSplits > splitsBefore) this.coverage.hit('edge split');
  }

  #cellsOf(s: SeqId): Map<number, number> {
    let cells = this.cells.get(s);
    if (cells === undefined) this.cells.set(s, (cells = new Map<number, number>()));
    return cells;
  }
}

describe('KV bookkeeping under simulated requests', () => {
  it('property: pool, tables, seq ids and radix cache stay consistent and leak nothing', () => {
    const coverage = new Coverage(STATES);
    const op = fc.tuple(fc.integer({ min: 0, max: 99 }), fc.nat(), fc.nat());
    const run = fc.record({
      numBlocks: fc.integer({ min: 6, max: 40 }),
      blockSize: fc.integer({ min: 1, max: 4 }),
      maxSequences: fc.integer({ min: 2, max: 8 }),
      bases: fc.array(fc.array(fc.integer({ min: 0, max: 2 }), { maxLength: 16 }), { minLength: 1, maxLength: 3 }),
      ops: fc.array(op, { minLength: 30, maxLength: 100 }),
    });
    fc.assert(
      fc.property(run, ({ numBlocks, blockSize, maxSequences, bases, ops }) => {
        coverage.startRun();
        const w = new World(numBlocks, blockSize, maxSequences, coverage);
        for (const [kind, a, b] of ops) {
          coverage.op();
          const rand = prng(b);
          const r = w.running[a % Math.max(1, w.running.length)];
          if (kind < 30 || r === undefined) {
            const retry = w.waiting.length > 0 && rand() < 0.3 ? w.waiting.splice(a % w.waiting.length, 1)[0] : undefined;
            const base = bases[a % bases.length]!;
            const suffix = Array.from({ length: 1 + Math.floor(rand() * 3 * blockSize) }, () => Math.floor(rand() * 2));
            w.arrive(retry ?? [...base, ...suffix]);
          } else if (kind < 75) {
            w.step(r, Math.floor(rand() * 3));
          } else if (kind < 82) {
            w.fork(r);
          } else if (kind < 90) {
            w.end(r, rand() < 0.5); // finish with insert, or abort
          } else if (kind < 95) {
            w.evict(1 + (b % 4));
          } else {
            const m = w.cache.match([...bases[a % bases.length]!, 0, 1]);
            w.cache.release(m.handle);
          }
          w.check();
        }
        // Drain: end everything, evict everything; all back at baseline.
        while (w.running.length > 0) w.end(w.running[0]!, false);
        w.evict(Number.POSITIVE_INFINITY);
        w.check();
        assert.equal(w.pool.numFree, numBlocks, 'blocks leaked');
        assert.equal(w.seqIds.numFree, maxSequences, 'sequence ids leaked');
        assert.equal(w.cache.numNodes, 0);
        for (const cells of w.cells.values()) assert.equal(cells.size, 0, 'cells leaked');
        coverage.endRun();
      }),
      propertyParams(300),
    );
    coverage.reportAndAssert('radix cache + pool + seq ids', 10_000);
  });
});
