// `headroom gateway` as a process: upstreams from a --config file (a YAML list), it serves a
// request through to a Headroom upstream, SIGTERM drains and exits 0; a missing or bad --upstream is
// one line on stderr and exit 1.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { request } from 'undici';
import { cliEnv, runCli } from '../cli/run-cli.ts';
import { startTestServer } from '../helpers/headroom.ts';

test('gateway: upstreams from a config file, a request served through, SIGTERM drains and exits 0', async () => {
  const upstream = await startTestServer();
  const dir = mkdtempSync(join(tmpdir(), 'headroom-gateway-'));
  const file = join(dir, 'gateway.yaml');
  writeFileSync(file, `upstream:\n  - ${upstream.url}/v1\nhealth-interval-ms: 200\n`);
  const proc = spawn(process.execPath, ['bin/headroom.mjs', 'gateway', '--config', file, '--host', '127.0.0.1', '--port', '0'], { stdio: ['ignore', 'pipe', 'pipe'], env: cliEnv() });
  let out = '';
  proc.stdout.on('data', (b: Buffer) => (out += b.toString()));
  proc.stderr.on('data', (b: Buffer) => (out += b.toString()));
  const exited = once(proc, 'exit');
  try {
    const url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`gateway did not become ready: ${out}`)), 30_000);
      proc.stdout.on('data', () => {
        const m = /gateway for headroom-mock on (http:\/\/[\d.:]+); ready/.exec(out);
        if (m) {
          clearTimeout(timer);
          resolve(m[1]!);
        }
      });
    });
    const res = await request(`${url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'headroom-mock', prompt: 'hello', max_tokens: 3 }) });
    assert.equal(res.statusCode, 200);
    const body = (await res.body.json()) as { usage: { completion_tokens: number } };
    assert.equal(body.usage.completion_tokens, 3);
    const stats = (await (await request(`${url}/stats`)).body.json()) as { mode: string; config: { options: Record<string, { value: unknown; source: string }> } };
    assert.equal(stats.mode, 'gateway');
    assert.equal(stats.config.options['upstream']?.source, 'file');
    proc.kill('SIGTERM');
    const [code] = (await exited) as [number | null];
    assert.equal(code, 0, out);
  } finally {
    proc.kill('SIGKILL');
    await upstream.close();
  }
});

test('gateway: no --upstream, or a bad one, is one line on stderr and exit 1', async () => {
  const none = await runCli(['gateway', '--port', '0']);
  assert.equal(none.code, 1);
  assert.match(none.stderr, /^headroom: error: --upstream: give at least one upstream server URL/);
  const bad = await runCli(['gateway', '--upstream', 'ftp://x', '--port', '0']);
  assert.equal(bad.code, 1);
  assert.match(bad.stderr, /^headroom: error: --upstream: expected an http:\/\/ or https:\/\/ upstream URL, got 'ftp:\/\/x'\n$/);
  const env = await runCli(['gateway', '--port', '0'], { HEADROOM_GATEWAY_SATURATION_KV: '2', HEADROOM_GATEWAY_UPSTREAM: 'http://127.0.0.1:1' });
  assert.equal(env.code, 1);
  assert.match(env.stderr, /^headroom: error: --saturation-kv: expected a number in \(0, 1\], got '2' \(from HEADROOM_GATEWAY_SATURATION_KV\)\n$/);
  // The untrusted-upstream bounds: checked before listening, one line naming the flag.
  for (const flag of ['--upstream-first-byte-timeout-ms', '--upstream-idle-timeout-ms', '--upstream-max-event-bytes', '--metrics-max-bytes']) {
    const r = await runCli(['gateway', '--upstream', 'http://127.0.0.1:1', '--port', '0', flag, '0']);
    assert.equal(r.code, 1, flag);
    assert.equal(r.stderr, `headroom: error: ${flag}: expected an integer ≥ 1, got '0'\n`);
  }
});
