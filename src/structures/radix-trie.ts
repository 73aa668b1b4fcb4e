// A radix trie over token sequences that stores opaque values (SGLang's RadixCache shape, with
// the memory policy taken out). Keys are matched in whole `unit`s of tokens (the KV block size in
// the engine; 1 for a token-level trie), so edges split only at unit boundaries:
//
//   root ─ [u0 u1 u2 u3] ─┬─ [u4 u5]        each edge: a key of whole units and one value
//                         └─ [u4' ]         children keyed by their first unit
//
// The trie owns structure only: walking, adding a leaf, splitting an edge, removing a leaf. What a
// value means (blocks and owner sequences in the engine's RadixCache; an upstream's recency in
// the gateway) and when to evict belong to the layer above, which splits its value through
// `splitValue` when an edge splits.
//
// Invariants (`checkInvariants`): every non-root key is a positive multiple of `unit` tokens;
// a child sits under the key of its first unit; startToken = parent.startToken + parent.key.length;
// parent links agree with the children maps; numNodes counts the non-root nodes.
// Complexity (L = query tokens, d = nodes on the path, k = key tokens of one node): walk O(L + d);
// addLeaf O(key); split O(k); removeLeaf O(unit); checkInvariants O(total key tokens).

import { bug } from '../util/bug.ts';

export interface TrieNode<V> {
  /** Unique per trie, increasing in creation order. */
  readonly id: number;
  parent: TrieNode<V> | null;
  readonly children: Map<string, TrieNode<V>>;
  /** Whole units of tokens (empty only at the root). */
  key: number[];
  /** Tokens on the path above this node: it covers positions [startToken, startToken + key.length). */
  startToken: number;
  value: V;
  /** False once removed. */
  alive: boolean;
}

/** How far a query goes down the trie. */
export interface TrieWalk<V> {
  /** Tokens matched, a multiple of `unit`. */
  readonly numTokens: number;
  /** Nodes the match enters, root excluded, in order; the last may be matched only in part. */
  readonly path: readonly TrieNode<V>[];
  /** Units of the last node on the path that match (its whole key unless the query leaves it part way). */
  readonly numUnitsInLast: number;
}

export interface RadixTrieOptions<V> {
  /** Matching granularity in tokens (a positive integer). */
  readonly unit: number;
  readonly rootValue: V;
  /** Value of an edge split after `numUnits` units: [head's, tail's]. */
  readonly splitValue: (value: V, numUnits: number) => readonly [V, V];
}

export class RadixTrie<V> {
  readonly unit: number;
  readonly root: TrieNode<V>;
  readonly #splitValue: (value: V, numUnits: number) => readonly [V, V];
  #nextId = 1;
  #numNodes = 0;

  constructor(options: RadixTrieOptions<V>) {
    if (!Number.isSafeInteger(options.unit) || options.unit < 1) throw new RangeError(`RadixTrie: expected unit to be a positive integer, got ${String(options.unit)}`);
    if (typeof options.splitValue !== 'function') throw new TypeError(`RadixTrie: expected splitValue to be a function, got ${typeof options.splitValue}`);
    this.unit = options.unit;
    this.#splitValue = options.splitValue;
    this.root = { id: 0, parent: null, children: new Map(), key: [], startToken: 0, value: options.rootValue, alive: true };
  }

  // ---- public API ----

  get numNodes(): number {
    return this.#numNodes;
  }

  /** Longest prefix of `tokens` in the trie, in whole units; changes nothing. */
  walk(tokens: readonly number[]): TrieWalk<V> {
    const u = this.unit;
    const maxUnits = Math.floor(tokens.length / u);
    const path: TrieNode<V>[] = [];
    let node = this.root;
    let pos = 0;
    let numUnitsInLast = 0;
    while (pos < maxUnits * u) {
      const child = node.children.get(unitKey(tokens, pos, u));
      if (child === undefined) break;
      const m = this.#numMatchingUnits(child, tokens, pos, maxUnits - pos / u);
      path.push(child);
      numUnitsInLast = m;
      pos += m * u;
      if (m * u < child.key.length) break;
      node = child;
    }
    return { numTokens: pos, path, numUnitsInLast };
  }

  /** A new leaf under `parent` with `key` (whole units; no child of `parent` may start with its first unit). */
  addLeaf(parent: TrieNode<V>, key: number[], value: V): TrieNode<V> {
    if (key.length === 0 || key.length % this.unit !== 0) bug(`RadixTrie.addLeaf: a key of ${key.length} tokens is not whole units of ${this.unit}`);
    const k = unitKey(key, 0, this.unit);
    if (parent.children.has(k)) bug('RadixTrie.addLeaf: the parent already has a child with this first unit');
    const node: TrieNode<V> = { id: this.#nextId++, parent, children: new Map(), key, startToken: parent.startToken + parent.key.length, value, alive: true };
    parent.children.set(k, node);
    this.#numNodes++;
    return node;
  }

  /** Splits `node` after `numUnits` units; returns the new head. `node` stays the tail, so references to it stay valid. */
  split(node: TrieNode<V>, numUnits: number): TrieNode<V> {
    const cut = numUnits * this.unit;
    const parent = node.parent;
    if (parent === null || cut <= 0 || cut >= node.key.length) bug(`RadixTrie.split of node ${node.id} at ${numUnits} units`);
    const [headValue, tailValue] = this.#splitValue(node.value, numUnits);
    const head: TrieNode<V> = { id: this.#nextId++, parent, children: new Map(), key: node.key.slice(0, cut), startToken: node.startToken, value: headValue, alive: true };
    parent.children.set(unitKey(head.key, 0, this.unit), head);
    node.key = node.key.slice(cut);
    node.startToken += cut;
    node.value = tailValue;
    node.parent = head;
    head.children.set(unitKey(node.key, 0, this.unit), node);
    this.#numNodes++;
    return head;
  }

  /** Removes a leaf; returns its parent. */
  removeLeaf(node: TrieNode<V>): TrieNode<V> {
    const parent = node.parent;
    if (parent === null || node.children.size > 0 || !node.alive) bug(`RadixTrie.removeLeaf of node ${node.id}, which is not a live leaf`);
    parent.children.delete(unitKey(node.key, 0, this.unit));
    node.alive = false;
    node.parent = null;
    this.#numNodes--;
    return parent;
  }

  /** Every node but the root, parents before children. */
  *nodes(): IterableIterator<TrieNode<V>> {
    const stack = [...this.root.children.values()];
    for (let n = stack.pop(); n !== undefined; n = stack.pop()) {
      yield n;
      for (const c of n.children.values()) stack.push(c);
    }
  }

  checkInvariants(): void {
    const fail = (what: string): never => {
      bug(`RadixTrie: ${what}`);
    };
    if (this.root.key.length !== 0 || this.root.parent !== null) fail('the root holds a key or a parent');
    let n = 0;
    for (const node of this.nodes()) {
      n++;
      const p = node.parent;
      if (p === null || !node.alive) fail(`node ${node.id} is reachable but detached or removed`);
      if (node.key.length === 0 || node.key.length % this.unit !== 0) fail(`node ${node.id} key of ${node.key.length} tokens is not whole units`);
      if (p!.children.get(unitKey(node.key, 0, this.unit)) !== node) fail(`node ${node.id} is not under its first-unit key`);
      if (node.startToken !== p!.startToken + p!.key.length) fail(`node ${node.id} starts at ${node.startToken}, its parent ends at ${p!.startToken + p!.key.length}`);
    }
    if (n !== this.#numNodes) fail(`numNodes ${this.#numNodes}, recount ${n}`);
  }

  // ---- helpers ----

  /** Whole units of `node.key` equal to `tokens` from `start` on, at most `maxUnits`; the first is known to match (it is the child key). */
  #numMatchingUnits(node: TrieNode<V>, tokens: readonly number[], start: number, maxUnits: number): number {
    const u = this.unit;
    const limit = Math.min(node.key.length / u, maxUnits);
    for (let m = 1; m < limit; m++) {
      for (let i = m * u; i < (m + 1) * u; i++) if (node.key[i] !== tokens[start + i]) return m;
    }
    return limit;
  }
}

/** The child key of the unit of `tokens` starting at `start`. */
function unitKey(tokens: readonly number[], start: number, unit: number): string {
  let s = '';
  for (let i = start; i < start + unit; i++) s += `${tokens[i]},`;
  return s;
}
