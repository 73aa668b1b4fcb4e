// The prefix cache's host tier: a sequence's KV cells copied to host memory when it leaves the
// pool, and placed back when a later prompt begins with what it held.
//
// Why: llama.cpp's unified pool makes every decode row walk the pool's used range, so the pool
// keeps a prompt only once it has been seen twice (doorkeeper.ts), and a shared document's second
// occurrence is computed again. In host memory a kept sequence costs nobody's decode; llama-server
// keeps its idle slots the same way (--cache-ram) and so hits on the second occurrence
// (docs/per-token.md). This class is the index; the runner holds the bytes under the keys that the
// `save`, `load` and `drop` KV ops name (plan.ts).
//
// An entry is a whole sequence as computed (prompt, then output), so a conversation's next turn
// matches all of the last one. A lookup finds the longest block-aligned prefix that an entry shares
// with a prompt, by the entries' block-prefix hashes, then checks it token by token (a hash
// collision finds nothing). Capacity is in tokens; the least recently used entries go first. An
// entry that a new one extends is dropped: the new one answers every lookup the old one did.
//
// Complexity: add and match O(tokens + entries sharing the first block); evicting an entry
// O(its tokens / blockSize).

import { bug } from '../../util/bug.ts';
import { blockPrefixHashes } from './doorkeeper.ts';

export interface HostTierOptions {
  readonly blockSize: number;
  /** Most tokens kept over all entries. */
  readonly capacityTokens: number;
  /** Shorter sequences are not kept (a restore costs more than such a prefill saves). */
  readonly minTokens: number;
}

export interface HostMatch {
  readonly key: number;
  /** Tokens of the prompt the entry holds (block-aligned). */
  readonly numTokens: number;
  /** Tokens in the entry: a load places all of them, then the tail past numTokens is removed. */
  readonly numEntryTokens: number;
}

interface Entry {
  readonly tokens: readonly number[];
  readonly hashes: readonly number[];
}

export class HostTier {
  readonly #o: HostTierOptions;
  /** In least-recently-used order (a use moves an entry to the end). */
  readonly #entries = new Map<number, Entry>();
  /** Block-prefix hash → the entries holding that prefix. */
  readonly #byHash = new Map<number, Set<number>>();
  #nextKey = 1;
  #numTokens = 0;
  numSaves = 0;
  numLoads = 0;
  numHitTokens = 0;

  constructor(o: HostTierOptions) {
    if (!(Number.isInteger(o.blockSize) && o.blockSize >= 1 && o.capacityTokens >= 1 && o.minTokens >= o.blockSize)) bug(`HostTier(${JSON.stringify(o)})`);
    this.#o = o;
  }

  get numEntries(): number {
    return this.#entries.size;
  }

  get numTokens(): number {
    return this.#numTokens;
  }

  /**
   * Keep `tokens` (a sequence leaving the pool): the key to save its cells under, and the keys of
   * entries to drop (superseded, or over capacity); null when it is not worth keeping (too short,
   * too long, or an entry already holds all of it: that one counts as used).
   */
  add(tokens: readonly number[]): { key: number; dropped: number[] } | null {
    if (tokens.length < this.#o.minTokens || tokens.length > this.#o.capacityTokens) return null;
    const hashes = blockPrefixHashes(tokens, tokens.length, this.#o.blockSize);
    const dropped: number[] = [];
    for (const k of [...this.#holders(hashes[0]!)]) {
      const e = this.#entries.get(k)!;
      if (e.tokens.length >= tokens.length && startsWith(e.tokens, tokens, tokens.length)) {
        this.#touch(k, e);
        return null;
      }
      // An entry this one extends: every prompt it would match, this one matches as far.
      if (e.tokens.length < tokens.length && startsWith(tokens, e.tokens, e.tokens.length)) dropped.push(k);
    }
    for (const k of dropped) this.#remove(k);
    const key = this.#nextKey++;
    this.#entries.set(key, { tokens, hashes });
    for (const h of hashes) {
      let set = this.#byHash.get(h);
      if (set === undefined) this.#byHash.set(h, (set = new Set()));
      set.add(key);
    }
    this.#numTokens += tokens.length;
    this.numSaves++;
    while (this.#numTokens > this.#o.capacityTokens) {
      const oldest = this.#entries.keys().next().value!;
      this.#remove(oldest);
      dropped.push(oldest);
    }
    return { key, dropped };
  }

  /** The longest block-aligned prefix of tokens[0, limit) an entry holds (the most recently used such entry); null when none. */
  match(tokens: readonly number[], limit: number): HostMatch | null {
    if (this.#entries.size === 0) return null;
    const hashes = blockPrefixHashes(tokens, limit, this.#o.blockSize);
    let depth = 0;
    while (depth < hashes.length && this.#byHash.has(hashes[depth]!)) depth++;
    if (depth === 0) return null;
    let best: number | null = null;
    for (const k of this.#holders(hashes[depth - 1]!)) best = k; // the set keeps insertion order; touched entries are re-added
    const e = this.#entries.get(best!)!;
    const n = depth * this.#o.blockSize;
    if (!startsWith(e.tokens, tokens, n)) return null; // a hash collision
    return { key: best!, numTokens: n, numEntryTokens: e.tokens.length };
  }

  /** A match was placed back into the pool. */
  used(m: HostMatch): void {
    const e = this.#entries.get(m.key);
    if (e === undefined) bug(`host entry ${m.key} used after it was dropped`);
    this.#touch(m.key, e);
    this.numLoads++;
    this.numHitTokens += m.numTokens;
  }

  checkInvariants(): void {
    let n = 0;
    for (const [k, e] of this.#entries) {
      n += e.tokens.length;
      for (const h of e.hashes) if (this.#byHash.get(h)?.has(k) !== true) bug(`host entry ${k} missing from its hash index`);
    }
    if (n !== this.#numTokens) bug(`host tier counts ${this.#numTokens} tokens, holds ${n}`);
    if (n > this.#o.capacityTokens) bug(`host tier holds ${n} tokens, over its capacity ${this.#o.capacityTokens}`);
    for (const [h, set] of this.#byHash) for (const k of set) if (!this.#entries.has(k)) bug(`hash ${h} indexes dropped host entry ${k}`);
  }

  #holders(hash: number): Iterable<number> {
    return this.#byHash.get(hash) ?? [];
  }

  #touch(key: number, e: Entry): void {
    this.#entries.delete(key);
    this.#entries.set(key, e);
    for (const h of e.hashes) {
      const set = this.#byHash.get(h)!;
      set.delete(key);
      set.add(key);
    }
  }

  #remove(key: number): void {
    const e = this.#entries.get(key)!;
    this.#entries.delete(key);
    this.#numTokens -= e.tokens.length;
    for (const h of e.hashes) {
      const set = this.#byHash.get(h)!;
      set.delete(key);
      if (set.size === 0) this.#byHash.delete(h);
    }
  }
}

/** Whether a[0, n) equals b[0, n). */
function startsWith(a: readonly number[], b: readonly number[], n: number): boolean {
  if (a.length < n || b.length < n) return false;
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return false;
  return true;
}
