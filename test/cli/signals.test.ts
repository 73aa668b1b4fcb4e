// Signals against a real `headroom serve` process: a second SIGTERM during a drain exits at once
// (code 3, with a log line), and the drain deadline ends a 1,000-token stream with a final SSE
// error event and [DONE], /health answering until then, and the process exits (code 2) soon after
// that event. No fixed wall-clock bounds: "at once" is checked as "before the stream finished", and
// "soon" against the flush window plus this machine's own CLI start-up time, measured in the test.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { request } from 'undici';
import { spawnServe } from '../helpers/serve-process.ts';
import { freePort } from '../helpers/ports.ts';

const DEADLINE_MS = 1500;

/** A stream whose frames are recorded with their arrival times. */
function openStream(url: string, maxTokens: number): { frames: { atMs: number; data: string }[]; firstChunk: Promise<void>; done: Promise<void> } {
  const frames: { atMs: number; data: string }[] = [];
  let first: () => void = () => undefined;
  const firstChunk = new Promise<void>((r) => (first = r));
  const done = (async () => {
    const res = await request(`${url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'headroom-mock', prompt: 'the river', max_tokens: maxTokens, ignore_eos: true, stream: true }) });
    let buf = '';
    for await (const chunk of res.body) {
      buf += (chunk as Buffer).toString();
      for (let i = buf.indexOf('\n\n'); i >= 0; i = buf.indexOf('\n\n')) {
        const frame = buf.slice(0, i);
        buf = buf.slice(i + 2);
        if (frame.startsWith('data: ')) frames.push({ atMs: performance.now(), data: frame.slice(6) });
        first();
      }
    }
  })();
  return { frames, firstChunk, done };
}

test('a second SIGTERM during the drain exits at once with a log line', async () => {
  const p = spawnServe(['--runner', 'mock', '--host', '127.0.0.1', '--port', '0', '--mock-speed', '4']);
  try {
    const url = (await p.waitFor(/serving .* on (http:\/\/[\d.:]+)/))[1]!;
    const s = openStream(url, 1000);
    const finished = s.done.catch(() => undefined); // the forced exit cuts it
    await s.firstChunk;
    p.proc.kill('SIGTERM');
    await p.waitFor(/SIGTERM: draining/);
    const t0 = performance.now();
    p.proc.kill('SIGTERM');
    const { code, atMs } = await p.exited;
    assert.equal(code, 3, p.output());
    assert.match(p.output(), /SIGTERM again during the drain: exiting now/);
    await finished;
    // Drained, the 1,000-token stream would have ended with [DONE]; forced, it is cut.
    assert.ok(!s.frames.some((f) => f.data === '[DONE]'), `the stream finished (${s.frames.length} frames): the second signal did not cut the drain`);
    console.log(`second signal: exit ${(atMs - t0).toFixed(0)} ms after it, ${s.frames.length} frames streamed`);
  } finally {
    p.proc.kill('SIGKILL');
  }
});

/** How long this machine takes, now, to start the CLI and print help (scales with its load). */
async function cliStartMs(): Promise<number> {
  const t0 = performance.now();
  const help = spawnServe(['--help']);
  await help.exited;
  return performance.now() - t0;
}

/** How long the server gives cut streams to flush after the drain deadline (CUT_FLUSH_MS in src/app.ts). */
const CUT_FLUSH_MS = 1000;

test(`the drain deadline ends a 1,000-token stream with an error event and [DONE]; /health answers until then; exit soon after`, async () => {
  const startMs = await cliStartMs();
  const p = spawnServe(['--runner', 'mock', '--host', '127.0.0.1', '--port', '0', '--mock-speed', '4', '--drain-timeout-ms', String(DEADLINE_MS)]);
  try {
    const url = (await p.waitFor(/serving .* on (http:\/\/[\d.:]+)/))[1]!;
    const s = openStream(url, 1000);
    await s.firstChunk;
    const killedAt = performance.now();
    p.proc.kill('SIGTERM');
    // /health answers throughout the drain, until the deadline.
    let healthOk = 0;
    let healthFailedAt = Infinity;
    const poll = (async () => {
      while (healthFailedAt === Infinity) {
        try {
          const r = await request(`${url}/health`, { reset: true });
          await r.body.dump();
          if (r.statusCode === 200) healthOk++;
          else healthFailedAt = performance.now();
        } catch {
          healthFailedAt = performance.now();
        }
        await new Promise((r) => setTimeout(r, 50));
      }
    })();
    await s.done;
    const { code, atMs } = await p.exited;
    await poll;
    assert.equal(code, 2, p.output());
    const data = s.frames.map((f) => f.data);
    assert.equal(data.at(-1), '[DONE]', 'the stream did not end with [DONE]');
    const errorFrame = s.frames.at(-2)!;
    const err = JSON.parse(errorFrame.data) as { error?: { code: string; message: string } };
    assert.equal(err.error?.code, 'engine_failure', `the last event before [DONE] is not an error: ${errorFrame.data}`);
    assert.match(err.error.message, /drain deadline/);
    const tokens = data.length - 2;
    assert.ok(tokens > 10 && tokens < 1000, `the stream got ${tokens} tokens: the deadline should cut it part-way`);
    const cutAfterMs = errorFrame.atMs - killedAt;
    assert.ok(cutAfterMs >= DEADLINE_MS - 50, `cut ${cutAfterMs.toFixed(0)} ms after SIGTERM, before the deadline`);
    const exitBoundMs = CUT_FLUSH_MS + Math.max(1000, 2 * startMs);
    assert.ok(atMs - errorFrame.atMs < exitBoundMs, `exited ${(atMs - errorFrame.atMs).toFixed(0)} ms after the error event (bound ${exitBoundMs.toFixed(0)} ms: flush + CLI start-up ${startMs.toFixed(0)} ms)`);
    assert.ok(healthOk >= 5, `/health answered only ${healthOk} times during the drain`);
    assert.ok(healthFailedAt >= errorFrame.atMs - 100, `/health stopped answering ${(errorFrame.atMs - healthFailedAt).toFixed(0)} ms before the deadline`);
    assert.match(p.output(), /drain deadline passed/);
    console.log(`# drain deadline: cut ${cutAfterMs.toFixed(0)} ms after SIGTERM (deadline ${DEADLINE_MS}), exit ${(atMs - errorFrame.atMs).toFixed(0)} ms after the error event, ${tokens} tokens streamed, /health ok ${healthOk} times`);
  } finally {
    p.proc.kill('SIGKILL');
  }
});

test('SIGTERM to `npm start` reaches the server: it drains and exits, leaving no process behind', async () => {
  const { spawn } = await import('node:child_process');
  const npm = spawn('npm', ['start', '--', '--runner', 'mock', '--host', '127.0.0.1', '--port', '0'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  npm.stdout.on('data', (b: Buffer) => (out += b.toString()));
  npm.stderr.on('data', (b: Buffer) => (out += b.toString()));
  const exited = new Promise<number | null>((r) => npm.on('exit', (code) => r(code)));
  const t0 = Date.now();
  while (!/serving .* on (http:\/\/[\d.:]+)/.test(out)) {
    if (Date.now() - t0 > 60_000) throw new Error(`npm start did not serve: ${out}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  const url = /serving .* on (http:\/\/[\d.:]+)/.exec(out)![1]!;
  const pid = Number(/"pid":(\d+)/.exec(out)![1]);
  try {
    npm.kill('SIGTERM');
    await exited;
    // The server's own log says it drained, and its process is gone: nothing answers.
    await new Promise((r) => setTimeout(r, 300));
    assert.match(out, /drained; exiting/);
    assert.throws(() => process.kill(pid, 0), 'the server process exited');
    await assert.rejects(fetch(`${url}/health`));
  } finally {
    try {
      process.kill(pid, 'SIGKILL'); // an orphan, when the test failed
    } catch {
      // gone, as it should be
    }
  }
});

test('with stdout and stderr on closed pipes the server still answers, and SIGTERM still drains it', async () => {
  const { spawn } = await import('node:child_process');
  const port = await freePort();
  const proc = spawn(process.execPath, ['bin/headroom.mjs', 'serve', '--runner', 'mock', '--host', '127.0.0.1', '--port', String(port)], { stdio: ['ignore', 'pipe', 'pipe'] });
  // Nobody reads either pipe: every log line the server writes meets a closed pipe (EPIPE).
  proc.stdout.destroy();
  proc.stderr.destroy();
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) => proc.on('exit', (code, signal) => r({ code, signal })));
  try {
    const url = `http://127.0.0.1:${port}`;
    const t0 = Date.now();
    while ((await fetch(`${url}/ready`).then((r) => r.status, () => 0)) !== 200) {
      if (Date.now() - t0 > 60_000) throw new Error('the server never became ready');
      await new Promise((r) => setTimeout(r, 100));
    }
    for (let i = 0; i < 5; i++) {
      const r = await fetch(`${url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'headroom-mock', prompt: 'hi', max_tokens: 3 }) });
      assert.equal(r.status, 200);
    }
    proc.kill('SIGTERM');
    const exit = await exited;
    assert.deepEqual(exit, { code: 0, signal: null }, 'drained and exited 0');
  } finally {
    proc.kill('SIGKILL');
  }
});
