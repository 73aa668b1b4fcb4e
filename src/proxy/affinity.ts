// One upstream's approximate prefix cache, as the gateway imagines it (sgl-router's tree per
// worker): every prompt the gateway sent there is inserted, so a later prompt's longest match says
// how much of it that upstream has probably computed before. Approximate by design: the upstream
// evicts on its own schedule and the gateway never hears of it; keys are the prompt's bytes (the
// gateway has no tokenizer), matched in whole units of `unit` bytes.
//
// Built on the value-agnostic RadixTrie (structures/radix-trie.ts); a node's value is the logical
// time it was last inserted or matched through. Size is bounded in key tokens: past `capacity`,
// the least recently used leaves go until the trie is at 3/4 of it (so the O(nodes log nodes) sort
// is paid once per quarter of the capacity inserted, not per insert).
//
// Complexity (L = key length): match O(L); insert O(L) plus the amortised eviction.

import { RadixTrie } from '../structures/radix-trie.ts';
import type { TrieNode } from '../structures/radix-trie.ts';

export interface AffinityTrieOptions {
  /** Units of matching, in key elements (bytes). */
  readonly unit: number;
  /** Most key elements held, all nodes together. */
  readonly capacity: number;
}

export class AffinityTrie {
  readonly #trie: RadixTrie<{ lastUsed: number }>;
  readonly #capacity: number;
  #clock = 0;
  #numTokens = 0;

  constructor(opts: AffinityTrieOptions) {
    if (!Number.isSafeInteger(opts.capacity) || opts.capacity < opts.unit) throw new RangeError(`AffinityTrie: expected capacity to be an integer ≥ unit (${opts.unit}), got ${String(opts.capacity)}`);
    this.#trie = new RadixTrie({ unit: opts.unit, rootValue: { lastUsed: 0 }, splitValue: (v) => [{ lastUsed: v.lastUsed }, { lastUsed: v.lastUsed }] });
    this.#capacity = opts.capacity;
  }

  /** Key elements held now. */
  get numTokens(): number {
    return this.#numTokens;
  }

  /** Elements of `key` this upstream probably has cached (a multiple of the unit); changes nothing. */
  match(key: readonly number[]): number {
    return this.#trie.walk(key).numTokens;
  }

  /** Remember that `key` was sent to this upstream. */
  insert(key: readonly number[]): void {
    const trie = this.#trie;
    const u = trie.unit;
    const usable = key.length - (key.length % u);
    if (usable === 0) return;
    const now = ++this.#clock;
    const walk = trie.walk(key);
    let parent: TrieNode<{ lastUsed: number }> = trie.root;
    const grows = walk.numTokens < usable;
    for (const [i, node] of walk.path.entries()) {
      const last = i === walk.path.length - 1;
      // A node matched only in part, where the key goes on, is split: its matched head becomes the new leaf's parent.
      const whole = !last || !grows || walk.numUnitsInLast * u === node.key.length;
      parent = whole ? node : trie.split(node, walk.numUnitsInLast);
      parent.value.lastUsed = now;
    }
    if (grows) {
      trie.addLeaf(parent, key.slice(walk.numTokens, usable), { lastUsed: now });
      this.#numTokens += usable - walk.numTokens;
    }
    if (this.#numTokens > this.#capacity) this.#evict(Math.floor((this.#capacity * 3) / 4));
  }

  checkInvariants(): void {
    this.#trie.checkInvariants();
    let n = 0;
    for (const node of this.#trie.nodes()) n += node.key.length;
    if (n !== this.#numTokens) throw new Error(`bug: AffinityTrie counts ${this.#numTokens} tokens, holds ${n}`);
  }

  /** Drop least recently used leaves (a parent becomes a leaf when its last child goes) until at most `target` tokens remain. */
  #evict(target: number): void {
    const trie = this.#trie;
    const leaves = [...trie.nodes()].filter((n) => n.children.size === 0).sort((a, b) => a.value.lastUsed - b.value.lastUsed);
    let i = 0;
    while (this.#numTokens > target && i < leaves.length) {
      let leaf: TrieNode<{ lastUsed: number }> | null = leaves[i++]!;
      // Walk up while removing leaves leaves an older childless parent behind.
      while (leaf !== null && leaf !== trie.root && leaf.children.size === 0 && this.#numTokens > target) {
        this.#numTokens -= leaf.key.length;
        const parent: TrieNode<{ lastUsed: number }> = trie.removeLeaf(leaf);
        leaf = parent.children.size === 0 && parent !== trie.root && parent.value.lastUsed <= (leaves[i]?.value.lastUsed ?? Infinity) ? parent : null;
      }
    }
  }
}
