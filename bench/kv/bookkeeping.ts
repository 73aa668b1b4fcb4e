// Microbenchmark of the KV bookkeeping: median microseconds per match, insert, evict and append,
// on a shared-system-prompt workload (512-token system prompt, 128-token user turns, 16-token
// blocks). Prints numbers; never gates on them (they depend on the machine).
//
//   node --import tsx bench/kv/bookkeeping.ts [numRequests]

import { BlockPool } from '../../src/engine/kv/block-pool.ts';
import { PagedKv } from '../../src/engine/kv/paged-kv.ts';
import { RadixCache } from '../../src/engine/kv/radix-cache.ts';
import { SeqIdPool } from '../../src/engine/kv/seq-id-pool.ts';

const numRequests = Number(process.argv[2] ?? 20_000);
const blockSize = 16;
const pool = new BlockPool({ numBlocks: 4096, blockSize });
const kv = new PagedKv({ pool });
const seqIds = new SeqIdPool({ maxSequences: 256 });
const cache = new RadixCache({ pool, seqIdPool: seqIds });

let seed = 1;
const rand = (): number => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
const systemPrompts = Array.from({ length: 4 }, () => Array.from({ length: 512 }, () => Math.floor(rand() * 32000)));

const samples: Record<'match' | 'insert' | 'evict' | 'append (decode token)', number[]> = {
  match: [], insert: [], evict: [], 'append (decode token)': [],
};
const time = (name: keyof typeof samples, fn: () => void): void => {
  const t0 = process.hrtime.bigint();
  fn();
  samples[name].push(Number(process.hrtime.bigint() - t0) / 1000);
};

let evictedNodes = 0;
for (let i = 0; i < numRequests; i++) {
  const prompt = [...systemPrompts[i % 4]!, ...Array.from({ length: 128 }, () => Math.floor(rand() * 32000))];
  let m!: ReturnType<RadixCache['match']>;
  time('match', () => { m = cache.match(prompt.slice(0, -1)); });
  const needed = Math.ceil(prompt.length / blockSize) + 2 - m.blocks.length;
  if (!pool.canAllocate(needed) || !seqIds.canAcquire()) {
    time('evict', () => { evictedNodes += cache.evict(needed + 64).numNodesEvicted; });
  }
  while (!seqIds.canAcquire()) cache.evict(1);
  const seqId = seqIds.acquire();
  const table = kv.createTable();
  kv.sharePrefix(table, m.blocks, m.numTokens);
  kv.append(table, prompt.length - m.numTokens);
  cache.release(m.handle);
  let r!: ReturnType<RadixCache['insert']>;
  time('insert', () => { r = cache.insert(prompt, table.blocks, seqId); });
  for (let t = 0; t < 20 && kv.canAppend(table, 1); t++) time('append (decode token)', () => { kv.append(table, 1); });
  cache.release(r.handle);
  kv.free(table);
  if (!cache.ownsNodes(seqId)) seqIds.release(seqId);
}

const median = (xs: number[]): number => {
  const s = xs.slice().sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? NaN;
};
console.log(`KV bookkeeping, ${numRequests} requests (512-token shared system prompt + 128-token turn, blocks of ${blockSize}, pool of ${pool.numBlocks})`);
for (const [name, xs] of Object.entries(samples)) {
  console.log(`  ${name.padEnd(22)} median ${median(xs).toFixed(2).padStart(7)} µs   (n=${xs.length})`);
}
const evictTotal = samples.evict.reduce((a, b) => a + b, 0);
console.log(`  evict per node         mean   ${(evictTotal / Math.max(1, evictedNodes)).toFixed(2).padStart(7)} µs   (${evictedNodes} nodes in timed calls)`);
console.log(`  token hit rate ${(100 * cache.hitRate).toFixed(1)}%, evicted nodes ${cache.numEvictedNodes}, nodes now ${cache.numNodes}`);
