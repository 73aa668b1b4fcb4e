// `headroom demo` end to end on the mock runner: both engines get the same arrivals, the one with
// admission refuses part of them with 503 + Retry-After while the other refuses none, /demo/data
// reports both engines, the page draws both columns in headless Chromium, and SIGTERM or SIGINT
// (during the load too) leaves no engine process behind — checked by pid.
// Without a `chromium` binary the page check is skipped with a reason; under CI (CI=true) it fails.

import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { bodyAttribute, dumpDom, chromiumForTest } from '../helpers/chromium.ts';
import { spawnHeadroom } from '../helpers/serve-process.ts';
import type { ServeProcess } from '../helpers/serve-process.ts';

// Mock runner: saturates near 4.5 req/s (results/gate/capacity.md); 20 req/s is ~4x, and a 1.5 s
// SLO makes the admission controller refuse from its cold start. The 5 s client timeout bounds how
// long the unmanaged engine's backlog takes to answer.
const ARGS = ['demo', '--runner', 'mock', '--rate', '20', '--slo-ms', '1500', '--timeout-s', '5', '--port', '0', '--seed', '3'];

interface ClientTally {
  numSent: number;
  numRefused: number;
  numRetryAfter: number;
  numGood: number;
}
interface DemoData {
  phase: string;
  numArrivals: number;
  sides: { name: string; admission: string; pid: number; client: ClientTally; engine: { numRequests: number; numRefused: number; requests: unknown[] } | null }[];
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function gone(pid: number, withinMs = 5000): Promise<boolean> {
  for (const t0 = Date.now(); Date.now() - t0 < withinMs; await sleep(100)) if (!alive(pid)) return true;
  return !alive(pid);
}

/** Starts the demo and resolves with its page URL and the two engines' pids. */
async function start(args: readonly string[]): Promise<{ demo: ServeProcess; url: string; pids: number[] }> {
  const demo = spawnHeadroom(args);
  const url = (await demo.waitFor(/open (http:\/\/\S+)/, 60_000))[1] ?? '';
  const pids = [...demo.output().matchAll(/: pid (\d+), http/g)].map((m) => Number(m[1]));
  assert.equal(pids.length, 2, demo.output());
  for (const pid of pids) assert.ok(alive(pid), `engine ${pid} is running`);
  return { demo, url, pids };
}

test('the demo sends both engines the same arrivals; admission on refuses with Retry-After, off refuses none; the page draws both; SIGTERM leaves no engine', { timeout: 120_000 }, async (t) => {
  const { demo, url, pids } = await start([...ARGS, '--duration-s', '5']);
  t.after(() => {
    demo.proc.kill('SIGKILL');
    for (const pid of pids) if (alive(pid)) process.kill(pid, 'SIGKILL');
  });
  await demo.waitFor(/load finished/, 60_000);
  const j = (await (await fetch(new URL('/demo/data', url))).json()) as DemoData;
  assert.equal(j.phase, 'done');
  assert.deepEqual(j.sides.map((s) => s.admission), ['off', 'conformal']);
  assert.deepEqual(j.sides.map((s) => s.pid), pids);
  const [off, on] = j.sides;
  assert.ok(off !== undefined && on !== undefined);
  assert.ok(j.numArrivals > 50, `a schedule of ${j.numArrivals} arrivals`);
  assert.equal(off.client.numSent, j.numArrivals, 'every arrival was sent to the unmanaged engine');
  assert.equal(on.client.numSent, j.numArrivals, 'and the same number to the managed one');
  assert.equal(off.client.numRefused, 0, 'admission off refuses nothing');
  assert.ok(on.client.numRefused > 0, 'admission on refuses part of the overload');
  assert.equal(on.client.numRetryAfter, on.client.numRefused, 'every refusal carries Retry-After');
  assert.ok(on.client.numGood > off.client.numGood, `goodput: on ${on.client.numGood} > off ${off.client.numGood}`);
  // The engines' own windows, passed through: each saw every arrival, and refused what the client counted.
  assert.equal(off.engine?.numRequests, j.numArrivals);
  assert.equal(on.engine?.numRequests, j.numArrivals);
  assert.equal(off.engine?.numRefused, 0);
  assert.equal(on.engine?.numRefused, on.client.numRefused);
  assert.ok((off.engine?.requests.length ?? 0) > 0 && (on.engine?.requests.length ?? 0) > 0, 'latency points from both engines');

  const browser = await chromiumForTest();
  if (browser.bin === null) {
    t.diagnostic(`page check skipped: ${browser.why}`);
  } else {
    const bin = browser.bin;
    const dom = await dumpDom(bin, url, { budgetMs: 3000 });
    assert.equal(bodyAttribute(dom, 'data-status'), 'drawn', `the page did not draw; #error: ${/<div id="error">([^<]*)/.exec(dom)?.[1]}`);
    const side = (key: string, attr: string): string | undefined => new RegExp(`<div class="side" id="side-${key}"[^>]*\\b${attr}="(\\d+)"`).exec(dom)?.[1];
    assert.equal(side('off', 'data-arrivals'), String(j.numArrivals));
    assert.equal(side('on', 'data-arrivals'), String(j.numArrivals));
    assert.equal(side('off', 'data-refused'), '0');
    assert.equal(side('on', 'data-refused'), String(on.client.numRefused));
    assert.equal(side('on', 'data-retry-after'), String(on.client.numRefused));
    assert.ok(Number(side('off', 'data-points')) > 0 && Number(side('on', 'data-points')) > 0, 'both latency charts have points');
    assert.equal((dom.match(/class="req"/g) ?? []).length, Number(side('off', 'data-points')) + Number(side('on', 'data-points')));
  }

  demo.proc.kill('SIGTERM');
  const exit = await demo.exited;
  assert.equal(exit.code, 0, demo.output());
  for (const pid of pids) assert.ok(await gone(pid), `engine ${pid} still running after the demo exited`);
});

test('SIGINT during the load stops the load and both engines: exit 0, no engine left', { timeout: 90_000 }, async (t) => {
  const { demo, pids } = await start([...ARGS, '--duration-s', '60']);
  t.after(() => {
    demo.proc.kill('SIGKILL');
    for (const pid of pids) if (alive(pid)) process.kill(pid, 'SIGKILL');
  });
  await sleep(2000);
  const t0 = Date.now();
  demo.proc.kill('SIGINT');
  const exit = await demo.exited;
  assert.equal(exit.code, 0, demo.output());
  assert.match(demo.output(), /SIGINT: stopping/);
  assert.ok(Date.now() - t0 < 15_000, `stopped in ${Date.now() - t0} ms`);
  for (const pid of pids) assert.ok(await gone(pid), `engine ${pid} still running after the demo exited`);
});

test('SIGTERM while the demo is still starting (the capacity probe) leaves no engine either', { timeout: 90_000 }, async (t) => {
  const demo = spawnHeadroom(['demo', '--runner', 'mock', '--port', '0', '--duration-s', '60']);
  t.after(() => demo.proc.kill('SIGKILL'));
  await demo.waitFor(/measuring what the unmanaged engine serves/, 60_000);
  const pids = [...demo.output().matchAll(/: pid (\d+), http/g)].map((m) => Number(m[1]));
  assert.equal(pids.length, 2, demo.output());
  t.after(() => {
    for (const pid of pids) if (alive(pid)) process.kill(pid, 'SIGKILL');
  });
  demo.proc.kill('SIGTERM');
  const exit = await demo.exited;
  assert.equal(exit.code, 0, demo.output());
  for (const pid of pids) assert.ok(await gone(pid), `engine ${pid} still running after the demo exited`);
});

test('--exit-when-done: the demo exits 0 by itself after the load, with a summary, and no engine left', { timeout: 90_000 }, async (t) => {
  const { demo, pids } = await start([...ARGS, '--duration-s', '2', '--rate', '5', '--exit-when-done']);
  t.after(() => {
    demo.proc.kill('SIGKILL');
    for (const pid of pids) if (alive(pid)) process.kill(pid, 'SIGKILL');
  });
  const exit = await demo.exited;
  assert.equal(exit.code, 0, demo.output());
  assert.match(demo.output(), /admission off: (\d+) arrivals, 0 refused[^\n]*\n {2}admission on \(conformal\): \1 arrivals/);
  for (const pid of pids) assert.ok(await gone(pid), `engine ${pid} still running after the demo exited`);
});

test('a bad flag is one line on stderr and exit 1', { timeout: 60_000 }, async (t) => {
  const busy = createServer();
  await new Promise<void>((resolve) => busy.listen(0, '127.0.0.1', resolve));
  t.after(() => busy.close());
  const busyPort = String((busy.address() as AddressInfo).port);
  for (const [args, re] of [
    [['demo', '--rate', 'abc'], /--rate.*expected a positive number, got 'abc'/],
    [['demo', '--runner', 'mock', '--model', 'x.gguf'], /--model: the mock runner serves no model file/],
    [['demo', '--runner', 'mock', '--port', busyPort], /--port: cannot listen on 127\.0\.0\.1:\d+ \(in use\)/],
  ] as const) {
    const p = spawnHeadroom(args);
    const exit = await p.exited;
    assert.equal(exit.code, 1, p.output());
    const lines = p.stderr().trim().split('\n');
    assert.equal(lines.length, 1, p.stderr());
    assert.match(lines[0] ?? '', re);
    assert.doesNotMatch(p.output(), /starting two engines/, 'refused before any engine starts');
  }
});
