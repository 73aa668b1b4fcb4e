// pinThreads: ggml's pool thread is bound to one CPU for good, and a decode's calling thread (the
// event loop's for an inline step, a libuv pool thread otherwise) to another only while it decodes:
// afterwards every thread but the pool's has the process's CPUs again. Tokens are the same as
// without pinning. With more threads than CPUs, or one thread, nothing is pinned.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import type { LlamaRunner } from '../../../../src/engine/runner/llama/llama-runner.ts';
import { item, openTinyRunner, plan, promptOf, run } from './fixture.ts';

/** Each thread of this process: its id and the CPUs it may run on, as /proc lists them ("0-1"). */
function threadCpus(): Map<string, string> {
  const out = new Map<string, string>();
  for (const tid of readdirSync('/proc/self/task')) {
    const m = /Cpus_allowed_list:\s*(\S+)/.exec(readFileSync(`/proc/self/task/${tid}/status`, 'utf8'));
    if (m !== null) out.set(tid, m[1]!);
  }
  return out;
}

const processCpus = /Cpus_allowed_list:\s*(\S+)/.exec(readFileSync('/proc/self/status', 'utf8'))![1]!;
const numCpus = processCpus.split(',').reduce((n, r) => {
  const [a, b] = r.split('-').map(Number);
  return n + (b === undefined ? 1 : b - a! + 1);
}, 0);
const skip = numCpus < 2 ? `needs 2 CPUs, this process may use ${numCpus}` : false;

async function generate(runner: LlamaRunner, n: number): Promise<number[]> {
  const prompt = promptOf(runner, 40);
  let [tok] = await run(runner, plan([item(0, prompt, 0, true, true)]));
  const out = [tok!];
  for (let i = 0; i < n - 1; i++) {
    [tok] = await run(runner, plan([item(0, [tok!], prompt.length + i)]));
    out.push(tok!);
  }
  await run(runner, plan([], [{ kind: 'remove', seqId: item(0, [], 0).seqId, p0: 0, p1: -1 }]));
  return out;
}

for (const inlineStepMs of [0, 50]) {
  test(`pinned: the pool thread keeps one CPU, every other thread gets them all back (inline-step-ms ${inlineStepMs})`, { skip }, async () => {
    const plainRunner = await openTinyRunner({ inlineStepMs });
    const plain = await generate(plainRunner, 10).finally(() => plainRunner.close());
    const runner = await openTinyRunner({ inlineStepMs, pinThreads: true });
    try {
      assert.equal(runner.info.details?.['pinnedThreads'], true);
      const pinned = await generate(runner, 10);
      assert.deepEqual(pinned, plain, 'pinning changes where threads run, not what they compute');
      const cpus = threadCpus();
      const single = [...cpus].filter(([, c]) => c !== processCpus);
      assert.equal(single.length, 1, `one thread (ggml's pool worker) bound to a CPU of its own; threads: ${JSON.stringify([...cpus])}`);
      assert.match(single[0]![1], /^\d+$/, 'the pool worker is bound to exactly one CPU');
      assert.equal(cpus.get(String(process.pid)), processCpus, "the event loop's thread has the process's CPUs");
    } finally {
      await runner.close();
    }
  });
}

test('not pinned with one thread, or with more threads than CPUs', async () => {
  for (const threads of [1, numCpus + 1]) {
    const runner = await openTinyRunner({ threads, pinThreads: true });
    try {
      assert.equal(runner.info.details?.['pinnedThreads'], false, `threads ${threads}`);
      await generate(runner, 2);
      for (const [tid, c] of threadCpus()) assert.equal(c, processCpus, `thread ${tid} (threads ${threads})`);
    } finally {
      await runner.close();
    }
  }
});
