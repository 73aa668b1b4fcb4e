// The default --admission-state: a directory per listening address under the user's state
// directory, so a restart on the same address starts warm with no flag; none on port 0; 'off'
// keeps nothing; a default that cannot be written is one line and the server still serves.
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { defaultAdmissionStateDir, stateHome } from '../../src/cli/state-home.ts';
import { spawnServe } from '../helpers/serve-process.ts';
import { cliEnv } from './run-cli.ts';

test('stateHome follows $XDG_STATE_HOME (absolute only), else ~/.local/state', () => {
  assert.equal(stateHome({ XDG_STATE_HOME: '/var/lib/x', HOME: '/home/u' }), '/var/lib/x/headroom');
  assert.equal(stateHome({ XDG_STATE_HOME: 'relative/x', HOME: '/home/u' }), '/home/u/.local/state/headroom');
  assert.equal(stateHome({ HOME: '/home/u' }), '/home/u/.local/state/headroom');
});

test('defaultAdmissionStateDir: one per host and port, none on port 0, the host made a file name', () => {
  const env = { XDG_STATE_HOME: '/s' };
  assert.equal(defaultAdmissionStateDir('0.0.0.0', 8000, env), '/s/headroom/admission/0.0.0.0-8000');
  assert.equal(defaultAdmissionStateDir('0.0.0.0', 8001, env), '/s/headroom/admission/0.0.0.0-8001');
  assert.equal(defaultAdmissionStateDir('::1', 8000, env), '/s/headroom/admission/__1-8000');
  assert.equal(defaultAdmissionStateDir('127.0.0.1', 0, env), null);
});

/** A port free a moment ago (the server is started on it next). */
async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const port = (s.address() as { port: number }).port;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}

async function serveSome(args: readonly string[], env: NodeJS.ProcessEnv, requests: number): Promise<string> {
  const p = spawnServe(['--runner', 'mock', '--host', '127.0.0.1', ...args], env);
  try {
    const url = (await p.waitFor(/listening at (http:\/\/127\.0\.0\.1:\d+)/))[1]!;
    await p.waitFor(/ready/);
    for (let i = 0; i < requests; i++) {
      const r = await fetch(`${url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'headroom-mock', prompt: `request ${i}`, max_tokens: 4 }) });
      assert.equal(r.status, 200);
      await r.text();
    }
  } finally {
    p.proc.kill('SIGTERM');
    await p.exited;
  }
  return p.output();
}

test('serve with no --admission-state keeps its state per address and starts warm after a restart; port 0 and off keep none', async () => {
  const home = mkdtempSync(join(tmpdir(), 'headroom-state-home-'));
  try {
    const env = cliEnv({ XDG_STATE_HOME: home });
    const port = await freePort();
    const dir = join(home, 'headroom', 'admission', `127.0.0.1-${port}`);
    const first = await serveSome(['--port', String(port)], env, 6);
    assert.ok(first.includes(`admission state: none saved yet; saving in ${dir}`), first);
    const second = await serveSome(['--port', String(port)], env, 0);
    assert.ok(second.includes(`admission state: warm start from 6 saved outcomes in ${dir}`), second);
    // Port 0 and 'off': no line about state, and nothing new in the state directory.
    for (const args of [['--port', '0'], ['--port', String(port), '--admission-state', 'off']]) {
      const out = await serveSome(args, env, 2);
      assert.doesNotMatch(out, /admission state/, args.join(' '));
    }
    assert.deepEqual(readdirSync(join(home, 'headroom', 'admission')), [`127.0.0.1-${port}`]);
    assert.ok(!existsSync('off'), "'off' is not a directory name");
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
});

test('a default state directory that cannot be written is one line; the server serves without it', async () => {
  const port = await freePort();
  const out = await serveSome(['--port', String(port)], cliEnv({ XDG_STATE_HOME: '/proc/self' }), 2);
  assert.match(out, /admission state: not kept \(cannot keep admission state in \/proc\/self\/headroom\/admission\/127\.0\.0\.1-\d+: .*\); pass --admission-state DIR, or off/);
});

test('a second server on a busy address exits with one line and leaves the running one\'s state as it was', async () => {
  const home = mkdtempSync(join(tmpdir(), 'headroom-state-busy-'));
  const env = cliEnv({ XDG_STATE_HOME: home });
  const port = await freePort();
  const dir = join(home, 'headroom', 'admission', `127.0.0.1-${port}`);
  const running = spawnServe(['--runner', 'mock', '--host', '127.0.0.1', '--port', String(port)], env);
  try {
    await running.waitFor(/ready/);
    const before = readdirSync(dir).sort();
    const provenance = readFileSync(join(dir, 'provenance.json'), 'utf8');
    // Another guarantee would be a cold start that moves the files aside, had it opened them.
    const second = spawnServe(['--runner', 'mock', '--host', '127.0.0.1', '--port', String(port), '--admission-guarantee', '0.99'], env);
    assert.equal((await second.exited).code, 1);
    assert.deepEqual(second.stderr().trimEnd().split('\n'), [`headroom: error: port ${port} on 127.0.0.1 is already in use (pick another with --port)`]);
    assert.deepEqual(readdirSync(dir).sort(), before, 'no file moved aside');
    assert.equal(readFileSync(join(dir, 'provenance.json'), 'utf8'), provenance);
  } finally {
    running.proc.kill('SIGTERM');
    await running.exited;
    rmSync(home, { recursive: true, force: true });
  }
});
