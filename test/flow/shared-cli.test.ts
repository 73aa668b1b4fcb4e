// `headroom gateway --flow-redis-url` as real processes: two gateways (one given the flag, one the
// environment variable) in front of one stub upstream hold a shared cap of 4 at the upstream under
// a burst, and /stats says they share through Redis (a password-protected one, the password
// redacted on /stats); a malformed URL, or a URL with no cap to share, is one line naming the flag
// (never the password) and exit 1.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { test } from 'node:test';
import { request } from 'undici';
import type { SharedFlowState } from '../../src/flow/flow-control.ts';
import { cliEnv, runCli } from '../cli/run-cli.ts';
import { RedisServer, haveRedis } from '../helpers/redis-server.ts';
import { StubUpstream } from '../helpers/stub-upstream.ts';

function gateway(args: readonly string[], env: Record<string, string>): { proc: ChildProcess; url: Promise<string>; output: () => string } {
  const proc = spawn(process.execPath, ['bin/headroom.mjs', 'gateway', '--host', '127.0.0.1', '--port', '0', ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: cliEnv(env) });
  let out = '';
  proc.stderr.on('data', (b: Buffer) => (out += b.toString()));
  const url = new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`gateway did not listen: ${out}`)), 30_000);
    proc.stdout.on('data', (b: Buffer) => {
      out += b.toString();
      const m = /listening at (http:\/\/[\d.:]+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    });
    proc.once('exit', (code) => reject(new Error(`gateway exited (${code}): ${out}`)));
  });
  return { proc, url, output: () => out };
}

test('two `headroom gateway` processes with --flow-redis-url (flag and env) hold a shared cap of 4 at the upstream', { timeout: 120_000 }, async (t) => {
  if (!haveRedis(t)) return;
  const redis = await RedisServer.start({ password: 'pw-sekrit' });
  const stub = await new StubUpstream({ tokens: 4, tokenDelayMs: 3 }).start();
  const common = ['--upstream', stub.url, '--max-inflight-requests', '4', '--flow-replicas', '2', '--health-interval-ms', '200'];
  const gws = [gateway([...common, '--flow-redis-url', redis.url], {}), gateway(common, { HEADROOM_GATEWAY_FLOW_REDIS_URL: redis.url })];
  try {
    const urls = await Promise.all(gws.map((g) => g.url));
    const shared = async (url: string): Promise<SharedFlowState | undefined> => ((await (await request(`${url}/stats`)).body.json()) as { flow?: { shared: SharedFlowState } }).flow?.shared;
    const end = Date.now() + 20_000;
    for (;;) {
      const states = await Promise.all(urls.map(shared));
      if (states.every((s) => s?.mode === 'redis' && s.replicasSeen === 2)) break;
      if (Date.now() > end) throw new Error(`not both in redis mode: ${JSON.stringify(states)}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    const stats = (await (await request(`${urls[1]}/stats`)).body.json()) as { config: { options: Record<string, { value: unknown; source: string }> } };
    assert.deepEqual(stats.config.options['flow-redis-url'], { value: `redis://:<redacted>@127.0.0.1:${redis.port}`, source: 'env' });
    const body = JSON.stringify({ model: 'stub-model', prompt: 'hi', max_tokens: 4 });
    const codes = await Promise.all(
      Array.from({ length: 60 }, async (_, i) => {
        const r = await request(`${urls[i % 2]}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
        await r.body.dump();
        return r.statusCode;
      }),
    );
    assert.deepEqual(new Set(codes), new Set([200]));
    assert.ok(stub.open.peak <= 4, `${stub.open.peak} open at the upstream at once, over the shared cap of 4`);
    assert.equal(stub.open.peak, 4, `the burst never reached the cap (peak ${stub.open.peak})`);
  } finally {
    for (const g of gws) g.proc.kill('SIGKILL');
    await stub.stop();
    await redis.kill();
  }
});

test('gateway: a malformed --flow-redis-url, or one with no cap to share, is one line naming the flag and exit 1', async () => {
  const bad = await runCli(['gateway', '--upstream', 'http://127.0.0.1:1', '--port', '0', '--max-inflight-requests', '4', '--flow-redis-url', 'localhost:6379']);
  assert.equal(bad.code, 1);
  assert.match(bad.stderr, /^headroom: error: --flow-redis-url: expected a redis:\/\/ or rediss:\/\/ URL, got 'localhost:6379'\n$/);
  const scheme = await runCli(['gateway', '--upstream', 'http://127.0.0.1:1', '--port', '0', '--max-inflight-requests', '4', '--flow-redis-url', 'http://:pw-sekrit@redis:6379']);
  assert.equal(scheme.code, 1);
  assert.match(scheme.stderr, /^headroom: error: --flow-redis-url: expected a redis:\/\/ or rediss:\/\/ URL, got 'http:\/\/:<redacted>@redis:6379'\n$/);
  const env = await runCli(['gateway', '--upstream', 'http://127.0.0.1:1', '--port', '0', '--max-inflight-requests', '4'], { HEADROOM_GATEWAY_FLOW_REDIS_URL: 'redis://' });
  assert.equal(env.code, 1);
  assert.match(env.stderr, /^headroom: error: --flow-redis-url: .*\(from HEADROOM_GATEWAY_FLOW_REDIS_URL\)\n$/);
  const uncapped = await runCli(['gateway', '--upstream', 'http://127.0.0.1:1', '--port', '0', '--flow-redis-url', 'redis://127.0.0.1:6379']);
  assert.equal(uncapped.code, 1);
  assert.match(uncapped.stderr, /^headroom: error: --flow-redis-url: set a cap to share/);
  const lease = await runCli(['gateway', '--upstream', 'http://127.0.0.1:1', '--port', '0', '--max-inflight-requests', '4', '--flow-redis-url', 'redis://127.0.0.1:6379', '--flow-redis-timeout-ms', '9000']);
  assert.equal(lease.code, 1);
  assert.match(lease.stderr, /^headroom: error: --flow-redis-timeout-ms: expected less than --flow-redis-lease-ms \(5000\), got '9000'\n$/);
});
