// A simulated llama.cpp unified KV pool for the mock runner: `numCells` cells shared by all
// sequences, a cell freed only when no sequence holds it (seq_cp tags cells, it does not copy).
// It makes the mock refuse exactly what llama.cpp would refuse for lack of cells, and it checks
// that the scheduler feeds every sequence at its next position: a gap or overlap is a bug.
//
// Per sequence: an array position → cell id. Per cell: how many sequences hold it.

import type { KvOp, SeqId } from '../../plan.ts';
import { bug } from '../../../util/bug.ts';

export class MockKv {
  readonly numCells: number;
  #seqs = new Map<SeqId, number[]>();
  #cellRefs = new Map<number, number>();
  #freeCells: number[];

  constructor(numCells: number) {
    if (!Number.isInteger(numCells) || numCells <= 0) throw new Error(`MockKv: expected a positive cell count, got ${numCells}`);
    this.numCells = numCells;
    this.#freeCells = Array.from({ length: numCells }, (_, i) => numCells - 1 - i);
  }

  get numUsedCells(): number {
    return this.numCells - this.#freeCells.length;
  }

  /** Next position of a sequence (llama_memory_seq_pos_max + 1). */
  length(seqId: SeqId): number {
    return this.#seqs.get(seqId)?.length ?? 0;
  }

  apply(op: Extract<KvOp, { kind: 'copy' | 'remove' | 'adopt' }>): void {
    if (op.kind === 'adopt') {
      const src = this.#seqs.get(op.srcSeqId) ?? [];
      const dst = this.#seqs.get(op.dstSeqId) ?? [];
      if (!(op.p0 >= 0 && op.p0 < op.p1 && op.p1 <= src.length && op.p1 <= dst.length)) {
        bug(`seqAdopt ${op.srcSeqId}->${op.dstSeqId} [${op.p0},${op.p1}) from a source of length ${src.length} onto a destination of length ${dst.length}`);
      }
      for (let p = op.p0; p < op.p1; p++) {
        const cell = src[p]!;
        this.#cellRefs.set(cell, (this.#cellRefs.get(cell) ?? 0) + 1);
        this.#release(dst[p]!);
        dst[p] = cell;
      }
      return;
    }
    if (op.kind === 'copy') {
      const src = this.#seqs.get(op.srcSeqId) ?? [];
      const p1 = op.p1 < 0 ? src.length : op.p1;
      const dst = this.#seqs.get(op.dstSeqId) ?? [];
      if (dst.length !== op.p0 || p1 > src.length) {
        bug(`seqCopy ${op.srcSeqId}->${op.dstSeqId} [${op.p0},${p1}) onto a destination of length ${dst.length} from a source of length ${src.length}`);
      }
      for (let p = op.p0; p < p1; p++) {
        const cell = src[p]!;
        dst.push(cell);
        this.#cellRefs.set(cell, (this.#cellRefs.get(cell) ?? 0) + 1);
      }
      this.#seqs.set(op.dstSeqId, dst);
      return;
    }
    const cells = this.#seqs.get(op.seqId) ?? [];
    const p1 = op.p1 < 0 ? cells.length : Math.min(op.p1, cells.length);
    if (p1 < cells.length && op.p0 < p1) bug(`seqRemove ${op.seqId} [${op.p0},${p1}) would leave a hole`);
    for (const cell of cells.splice(op.p0, Math.max(0, p1 - op.p0))) this.#release(cell);
    if (cells.length === 0) this.#seqs.delete(op.seqId);
  }

  /** Append `count` tokens to `seqId` at `startPos`; false when the pool has no room (nothing changes). */
  append(seqId: SeqId, startPos: number, count: number): boolean {
    const cells = this.#seqs.get(seqId) ?? [];
    if (cells.length !== startPos) {
      bug(`sequence ${seqId} fed at position ${startPos} but holds ${cells.length} tokens`);
    }
    if (count > this.#freeCells.length) return false;
    for (let i = 0; i < count; i++) {
      const cell = this.#freeCells.pop()!;
      this.#cellRefs.set(cell, 1);
      cells.push(cell);
    }
    this.#seqs.set(seqId, cells);
    return true;
  }

  #release(cell: number): void {
    const refs = (this.#cellRefs.get(cell) ?? 0) - 1;
    if (refs < 0) bug(`cell ${cell} released more often than held`);
    if (refs === 0) {
      this.#cellRefs.delete(cell);
      this.#freeCells.push(cell);
    } else this.#cellRefs.set(cell, refs);
  }
}
