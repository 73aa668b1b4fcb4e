// The full invariant check of the radix cache, kept apart so radix-cache.ts stays readable. The
// trie's own shape (keys in whole units, child keys, start positions, node count) is checked by
// RadixTrie.checkInvariants; this checks what the cache layers on it. Every failure is a bug and
// says which rule broke. O(nodes · depth + blocks + heap entries).

import type { SeqId } from '../plan.ts';
import type { BlockPool } from './block-pool.ts';
import type { RadixTrie } from '../../structures/radix-trie.ts';
import type { CacheEntry, LruEntry, RadixNode } from './radix-node.ts';
import type { SeqIdPool } from './seq-id-pool.ts';
import { bug } from '../../util/bug.ts';

export interface RadixState {
  readonly trie: RadixTrie<CacheEntry>;
  readonly blockSize: number;
  readonly pool: BlockPool;
  readonly seqIdPool: SeqIdPool;
  readonly handles: ReadonlyMap<number, RadixNode>;
  readonly ownedNodes: ReadonlyMap<SeqId, number>;
  readonly cached: Uint8Array;
  readonly heapEntries: readonly LruEntry[];
  readonly clock: number;
  readonly numEvictableBlocks: number;
  readonly numProtectedBlocks: number;
  readonly externallyHeldSeqIds: ReadonlySet<SeqId>;
}

export function checkRadixInvariants(s: RadixState): void {
  const fail = (what: string): never => {
    bug(`RadixCache: ${what}`);
  };
  const bs = s.blockSize;

  const root = s.trie.root;
  // Lock refs recounted from the handles: each handle pins its node and every ancestor.
  const pins = new Map<RadixNode, number>();
  for (const [h, node] of s.handles) {
    if (!node.alive) fail(`handle ${h} pins evicted node ${node.id}`);
    for (let n: RadixNode | null = node; n !== null && n !== root; n = n.parent) pins.set(n, (pins.get(n) ?? 0) + 1);
  }

  const owned = new Map<SeqId, RadixNode[]>();
  const cachedSeen = new Uint8Array(s.cached.length);
  let evictable = 0;
  let protectedBlocks = 0;
  const evictableLeaves: RadixNode[] = [];
  if (root.value.blocks.length !== 0 || root.value.lockRef !== 0) fail('root holds blocks or pins');
  for (const n of s.trie.nodes()) {
    const p = n.parent!; // the trie's check covers detached nodes
    const v = n.value;
    if (v.blocks.length * bs !== n.key.length) fail(`node ${n.id} has ${v.blocks.length} blocks for ${n.key.length} tokens`);
    if (v.lastAccess > s.clock || (p !== root && p.value.lastAccess < v.lastAccess)) fail(`node ${n.id} last access is newer than its parent's`);
    if (v.lockRef !== (pins.get(n) ?? 0)) fail(`node ${n.id} lockRef ${v.lockRef}, handles account for ${pins.get(n) ?? 0}`);
    if (v.ownerSeqId === null) fail(`node ${n.id} has no owner`);
    const list = owned.get(v.ownerSeqId!) ?? [];
    list.push(n);
    owned.set(v.ownerSeqId!, list);
    for (const id of v.blocks) {
      if (cachedSeen[id] === 1) fail(`block ${id} is stored twice`);
      cachedSeen[id] = 1;
      if (s.pool.refCount(id) < 1) fail(`cached block ${id} is free`);
    }
    if (v.lockRef === 0) evictable += v.blocks.length;
    else protectedBlocks += v.blocks.length;
    if (v.lockRef === 0 && n.children.size === 0) evictableLeaves.push(n);
  }
  for (let id = 0; id < s.cached.length; id++) if (s.cached[id] !== cachedSeen[id]) fail(`cached-block flag of ${id} is stale`);
  if (evictable !== s.numEvictableBlocks) fail(`numEvictableBlocks ${s.numEvictableBlocks}, recount ${evictable}`);
  if (protectedBlocks !== s.numProtectedBlocks) fail(`numProtectedBlocks ${s.numProtectedBlocks}, recount ${protectedBlocks}`);

  // Every evictable leaf is reachable by eviction: a heap entry carrying its current stamp.
  const queued = new Set<RadixNode>();
  for (const e of s.heapEntries) if (e.stamp === e.node.value.lastAccess) queued.add(e.node);
  for (const n of evictableLeaves) if (!queued.has(n)) fail(`evictable leaf ${n.id} is not in the eviction heap`);

  // Owners: counts match, each owner's nodes lie on one root path, each owner id is acquired.
  if (owned.size !== s.ownedNodes.size) fail(`owner map has ${s.ownedNodes.size} owners, nodes name ${owned.size}`);
  for (const [seqId, nodes] of owned) {
    if (s.ownedNodes.get(seqId) !== nodes.length) fail(`owner ${seqId} count ${s.ownedNodes.get(seqId)}, owns ${nodes.length}`);
    if (!s.seqIdPool.isAcquired(seqId)) fail(`owner sequence ${seqId} is free in the SeqIdPool`);
    const deepest = nodes.reduce((a, b) => (b.startToken > a.startToken ? b : a));
    const path = new Set<RadixNode>();
    for (let n: RadixNode | null = deepest; n !== null; n = n.parent) path.add(n);
    for (const n of nodes) if (!path.has(n)) fail(`sequence ${seqId} owns nodes on two branches (${n.id}, ${deepest.id})`);
  }

  // Sequence-id conservation: free + (owners ∪ running) = total.
  const held = new Set<SeqId>(s.externallyHeldSeqIds);
  for (const seqId of owned.keys()) held.add(seqId);
  for (const seqId of held) if (!s.seqIdPool.isAcquired(seqId)) fail(`held sequence ${seqId} is free in the SeqIdPool`);
  if (s.seqIdPool.numFree + held.size !== s.seqIdPool.maxSequences) {
    fail(`sequence ids not conserved: ${s.seqIdPool.numFree} free + ${held.size} held != ${s.seqIdPool.maxSequences}`);
  }
}
