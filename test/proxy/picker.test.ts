// The endpoint picker: repeated shared-prefix requests go to the same replica until it saturates
// (its scraped queue depth, or the gateway's own in-flight count), then spread; a saturated replica
// gets nothing while another is open; stale metrics count as saturation. Over real HTTP with stub
// upstreams, plus the affinity trie and the metric parser on their own.
import assert from 'node:assert/strict';
import { afterEach, test } from 'node:test';
import { request } from 'undici';
import { AffinityTrie } from '../../src/proxy/affinity.ts';
import { Picker } from '../../src/proxy/picker.ts';
import { parseLoad } from '../../src/proxy/scrape.ts';
import { Upstream } from '../../src/proxy/upstream.ts';
import { Rng } from '../../src/util/rng.ts';
import type { TestGateway } from '../helpers/gateway.ts';
import { TEST_PICKER, startTestGateway, within } from '../helpers/gateway.ts';
import type { StubUpstream } from '../helpers/stub-upstream.ts';
import { startStubs } from '../helpers/stub-upstream.ts';

let stubs: StubUpstream[] = [];
let gw: TestGateway | null = null;

afterEach(async () => {
  await gw?.close();
  gw = null;
  await Promise.all(stubs.map((s) => s.stop()));
  stubs = [];
});

const SYSTEM = 'You are a careful assistant. '.repeat(40);
const shared = (i: number, stream = false): object => ({ model: 'stub-model', messages: [{ role: 'system', content: SYSTEM }, { role: 'user', content: `question ${i}` }], max_tokens: 4, stream });

async function send(url: string, body: object): Promise<void> {
  const res = await request(`${url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  assert.equal(res.statusCode, 200);
  await res.body.text();
}

test('shared-prefix requests stick to one replica until its scraped queue saturates, then spread', async () => {
  stubs = await startStubs(3);
  gw = await startTestGateway(stubs.map((s) => s.url), { picker: { saturationQueue: 4 } });
  for (let i = 0; i < 5; i++) await send(gw.url, shared(i));
  const counts = stubs.map((s) => s.requests.length);
  const home = counts.indexOf(5);
  assert.ok(home >= 0, `every shared-prefix request went to one replica, got ${counts.join('/')}`);

  // The home replica reports a queue at the saturation level: the next ones go elsewhere.
  stubs[home]!.load.waiting = 4;
  await gw.gateway.backend.pool.scrapeNow();
  for (let i = 5; i < 8; i++) await send(gw.url, shared(i));
  assert.equal(stubs[home]!.requests.length, 5, 'a saturated replica gets no more, prefix hit or not');
  const second = stubs.findIndex((s, i) => i !== home && s.requests.length === 3);
  assert.ok(second >= 0, `the spill went to one other replica (which now has the prefix too), got ${stubs.map((s) => s.requests.length).join('/')}`);

  // A prompt nobody has cached does not go to the saturated replica either.
  await send(gw.url, { model: 'stub-model', messages: [{ role: 'user', content: 'something else entirely' }], max_tokens: 2 });
  assert.equal(stubs[home]!.requests.length, 5, 'a cache miss is not sent to the saturated replica');
  const idle = [0, 1, 2].find((i) => i !== home && i !== second)!;
  const idleBefore = stubs[idle]!.requests.length;

  // Queue drained: the prefix goes to a replica that has it again, not to the one that has not.
  stubs[home]!.load.waiting = 0;
  await gw.gateway.backend.pool.scrapeNow();
  await send(gw.url, shared(9));
  assert.equal(stubs[idle]!.requests.length, idleBefore, 'the shared prefix went to a replica that has it');
});

test("without metrics, the gateway's own in-flight count saturates a replica", async () => {
  stubs = await startStubs(2, { autoRelease: false, tokens: 2 });
  for (const s of stubs) s.metrics = false;
  gw = await startTestGateway(stubs.map((s) => s.url), { pool: { scrapeMetrics: false }, picker: { maxInFlight: 2 } });
  // Two streams held open (their tokens not released): both go to one replica by affinity.
  const open = [0, 1].map((i) => send(gw!.url, shared(i, true)));
  await within(Promise.race(stubs.map((s) => s.waitForRequests(2))), 'two requests on one replica');
  const home = stubs.findIndex((s) => s.requests.length === 2);
  assert.ok(home >= 0);
  // The third finds that replica at its in-flight bound and goes to the other.
  const third = send(gw.url, shared(2, true));
  await within(stubs[1 - home]!.waitForRequests(1), 'the third request on the other replica');
  assert.equal(stubs[home]!.requests.length, 2);
  for (const s of stubs) s.release(100);
  await Promise.all([...open, third]);
  assert.equal(gw.gateway.backend.numInFlight, 0);
});

test('stale metrics count as saturation', () => {
  const a = new Upstream('http://a', 0, new AffinityTrie({ unit: 4, capacity: 1024 }));
  const b = new Upstream('http://b', 1, new AffinityTrie({ unit: 4, capacity: 1024 }));
  const key = Array.from({ length: 64 }, (_, i) => i % 256);
  a.affinity.insert(key);
  const picker = new Picker(TEST_PICKER);
  const fresh = picker.pick([a, b], key, { isStale: () => false });
  assert.equal(fresh.upstream, a, 'the prefix hit wins while metrics are fresh');
  assert.equal(fresh.matchedTokens, 64);
  const stale = picker.pick([a, b], key, { isStale: (u) => u === a });
  assert.equal(stale.upstream, b, 'a replica whose metrics are stale is not trusted');
  const all = picker.pick([a, b], key, { isStale: () => true });
  assert.equal(all.reason, 'all_saturated');
  assert.equal(picker.pick([], key, { isStale: () => false }).reason, 'none');
});

test('the affinity trie matches inserted prefixes in whole units and evicts least recently used', () => {
  const rng = new Rng(7);
  const trie = new AffinityTrie({ unit: 4, capacity: 400 });
  const prefixes = Array.from({ length: 6 }, () => Array.from({ length: 40 }, () => rng.int(256)));
  for (let round = 0; round < 500; round++) {
    const p = prefixes[rng.int(prefixes.length)]!;
    const key = [...p.slice(0, 4 * rng.int(11)), ...Array.from({ length: rng.int(30) }, () => rng.int(256))];
    trie.insert(key);
    trie.checkInvariants();
    assert.ok(trie.numTokens <= 400, `over capacity: ${trie.numTokens}`);
    assert.equal(trie.match(key), key.length - (key.length % 4), 'what was just inserted matches whole');
  }
  const t = new AffinityTrie({ unit: 4, capacity: 16 });
  t.insert([1, 2, 3, 4, 5, 6, 7, 8]);
  t.insert([9, 9, 9, 9, 9, 9, 9, 9]);
  t.insert([1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0]); // over capacity: the [9 ...] entry is the least recent
  t.checkInvariants();
  assert.equal(t.match([9, 9, 9, 9, 9, 9, 9, 9]), 0);
  assert.equal(t.match([1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0, 1]), 12);
  assert.equal(t.match([1, 2, 3, 4, 5, 6, 0]), 4, 'matching stops at a unit boundary');
});

test('load is read from vLLM, SGLang, llama-server and Headroom metric names', () => {
  assert.deepEqual(parseLoad('# HELP x\nvllm:num_requests_waiting{model_name="m"} 3\nvllm:num_requests_running{model_name="m"} 5\nvllm:gpu_cache_usage_perc{model_name="m"} 0.25\n'), { numWaiting: 3, numRunning: 5, kvUsage: 0.25 });
  assert.deepEqual(parseLoad('sglang:num_queue_reqs{model_name="m",tp_rank="0"} 2\nsglang:num_queue_reqs{model_name="m",tp_rank="1"} 1\nsglang:num_running_reqs{model_name="m"} 4\nsglang:token_usage{model_name="m"} 0.5\n'), { numWaiting: 3, numRunning: 4, kvUsage: 0.5 });
  assert.deepEqual(parseLoad('llamacpp:requests_deferred 1\nllamacpp:requests_processing 2\nllamacpp:kv_cache_usage_ratio 0.75\n'), { numWaiting: 1, numRunning: 2, kvUsage: 0.75 });
  assert.deepEqual(parseLoad('headroom_requests_waiting 7\nheadroom_requests_running 1\nheadroom_kv_usage_ratio 0.1\nvllm:num_requests_waiting{model_name="m"} 99\n'), { numWaiting: 7, numRunning: 1, kvUsage: 0.1 });
  assert.deepEqual(parseLoad('garbage {\nnothing here\n'), { numWaiting: null, numRunning: null, kvUsage: null });
});
