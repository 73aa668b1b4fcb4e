// The prefix cache's doorkeeper: which block-aligned prompt prefixes have been seen before.
//
// Why: llama.cpp's unified pool makes every decode row walk the pool's whole used range, so a
// cached prefix is not free while it waits for a hit: a batch-1 decode at depth 2,400 cost 2.4 ms
// alone and 3.6 ms with one other 2,400-token prompt retained below it (docs/per-token.md). Unique
// prompts, retained, are pure cost. The cache therefore keeps, when a request's prompt is
// computed, only the part that some earlier prompt also had (a second occurrence), as a TinyLFU
// doorkeeper admits only what it has seen before; the first occurrence of a shared document is
// computed twice, every later one hits.
//
// Each prompt contributes one hash per block boundary (the hash of tokens [0, k·blockSize)),
// remembered in insertion order up to `capacity` entries (the oldest forgotten first). A hash
// collision can only retain a prefix that was not shared (the cache still matches real tokens).
//
// Complexity: sharedLength is O(prompt tokens) time.
import { bug } from '../../util/bug.ts';

export class PrefixDoorkeeper {
  readonly #blockSize: number;
  readonly #capacity: number;
  readonly #seen = new Set<number>();

  constructor(blockSize: number, capacity = 1 << 16) {
    if (!(Number.isInteger(blockSize) && blockSize >= 1 && capacity >= 1)) bug(`PrefixDoorkeeper(${blockSize}, ${capacity})`);
    this.#blockSize = blockSize;
    this.#capacity = capacity;
  }

  get size(): number {
    return this.#seen.size;
  }

  /**
   * The longest block-aligned prefix of tokens[0, limit) that an earlier call recorded; then
   * records every block boundary of it.
   */
  sharedLength(tokens: readonly number[], limit: number): number {
    const keys = blockPrefixHashes(tokens, limit, this.#blockSize);
    let shared = 0;
    while (shared < keys.length && this.#seen.has(keys[shared]!)) shared++;
    for (const k of keys) {
      this.#seen.delete(k);
      this.#seen.add(k);
    }
    while (this.#seen.size > this.#capacity) this.#seen.delete(this.#seen.values().next().value!);
    return shared * this.#blockSize;
  }
}

/**
 * One hash per block boundary of tokens[0, limit): entry b hashes tokens [0, (b+1)·blockSize), so
 * two prompts share entry b exactly when (but for a collision) they share that prefix. 53 bits of
 * two 32-bit lanes. O(limit).
 */
export function blockPrefixHashes(tokens: readonly number[], limit: number, blockSize: number): number[] {
  const n = Math.floor(Math.min(limit, tokens.length) / blockSize);
  let h1 = 0x811c9dc5;
  let h2 = 0x9e3779b9;
  const keys: number[] = [];
  for (let b = 0; b < n; b++) {
    for (let i = b * blockSize; i < (b + 1) * blockSize; i++) {
      const t = tokens[i]!;
      h1 = Math.imul(h1 ^ t, 0x01000193) >>> 0;
      h2 = Math.imul(h2 ^ (t + 0x7f4a7c15), 0x85ebca6b) >>> 0;
      h2 = (h2 ^ (h2 >>> 13)) >>> 0;
    }
    keys.push(h1 * 0x200000 + (h2 >>> 11));
  }
  return keys;
}
