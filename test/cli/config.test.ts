// Configuration from the environment and a --config file, generic over commander's options:
// precedence flag > env > file > default, each value's source on /stats (secrets redacted), and a
// one-line error naming the key and its source for an unknown key or a bad value.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { Command } from 'commander';
import { applyConfig, effectiveConfig, prepareConfig } from '../../src/cli/config.ts';
import { spawnHeadroom } from '../helpers/serve-process.ts';
import { cliEnv, runCli } from './run-cli.ts';

/** A program like main.ts builds, with one leaf command of every option kind. */
function program(): { root: Command; leaf: Command } {
  const root = new Command('headroom');
  const bench = root.command('bench');
  const leaf = bench
    .command('run')
    .requiredOption('--url <url>', 'target')
    .option('--rate <rps>', 'rate', (v: string) => {
      const n = Number(v);
      if (!Number.isFinite(n)) throw new Error(`expected a number, got '${v}'`);
      return n;
    }, 1)
    .option('--header <k:v>', 'repeatable', (v: string, prev: string[]) => [...prev, v], [] as string[])
    .option('--api-key <key>', 'secret')
    .option('--ignore-eos', 'flag', false)
    .option('--no-progress', 'negated flag')
    .action(() => undefined);
  prepareConfig(root);
  return { root, leaf };
}

async function configured(args: string[], env: NodeJS.ProcessEnv, file?: object): Promise<Command> {
  const { root, leaf } = program();
  const dir = mkdtempSync(join(tmpdir(), 'headroom-config-'));
  try {
    if (file !== undefined) {
      writeFileSync(join(dir, 'c.json'), JSON.stringify(file));
      args = [...args, '--config', join(dir, 'c.json')];
    }
    root.hook('preAction', async (_r, action) => applyConfig(action, env));
    await root.parseAsync(['bench', 'run', ...args], { from: 'user' });
    return leaf;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test('precedence flag > env > file > default, with each source reported and secrets redacted', async () => {
  const leaf = await configured(
    ['--rate', '3'],
    { HEADROOM_BENCH_RUN_RATE: '4', HEADROOM_BENCH_RUN_URL: 'http://env', HEADROOM_BENCH_RUN_NO_PROGRESS: 'true' },
    { rate: 5, url: 'http://file', apiKey: 'sk-secret', header: ['a: 1', 'b: 2'], 'ignore-eos': true },
  );
  const c = effectiveConfig(leaf);
  assert.deepEqual(c.options['rate'], { value: 3, source: 'flag' });
  assert.deepEqual(c.options['url'], { value: 'http://env', source: 'env' });
  assert.deepEqual(c.options['api-key'], { value: '<redacted>', source: 'file' });
  assert.deepEqual(c.options['header'], { value: '<redacted>', source: 'file' });
  assert.deepEqual(c.options['ignore-eos'], { value: true, source: 'file' });
  assert.deepEqual(c.options['progress'], { value: false, source: 'env' });
  assert.deepEqual(leaf.opts()['header'], ['a: 1', 'b: 2'], 'a list in the file goes through the repeatable parser');
  assert.equal(leaf.opts()['apiKey'], 'sk-secret', 'redacted on /stats only, not in the value');
  assert.match(c.file ?? '', /c\.json$/);
  const defaults = effectiveConfig(await configured(['--url', 'http://flag'], {}));
  assert.deepEqual(defaults.options['rate'], { value: 1, source: 'default' });
  assert.deepEqual(defaults.options['progress'], { value: true, source: 'default' });
  assert.deepEqual(defaults.options['api-key'], { value: null, source: 'default' });
});

test('a negated flag may be given positively in a file; a null key keeps the default; booleans are strict', async () => {
  const leaf = await configured(['--url', 'x'], {}, { progress: false, 'api-key': null });
  assert.equal(leaf.opts()['progress'], false);
  assert.deepEqual(effectiveConfig(leaf).options['api-key'], { value: null, source: 'default' }, 'a null in the file leaves the default');
  await assert.rejects(configured(['--url', 'x'], { HEADROOM_BENCH_RUN_IGNORE_EOS: 'maybe' }), /^UserError: HEADROOM_BENCH_RUN_IGNORE_EOS: expected true or false, got 'maybe'$/);
});

test('unknown keys and bad values name the key and where they came from', async () => {
  await assert.rejects(configured(['--url', 'x'], {}, { rat: 2 }), /c\.json: unknown key 'rat' \(did you mean 'rate'\?\)$/);
  await assert.rejects(configured(['--url', 'x'], {}, { rate: 'fast' }), /c\.json: rate: expected a number, got 'fast'$/);
  await assert.rejects(configured(['--url', 'x'], { HEADROOM_BENCH_RUN_RATE: 'fast' }), /^UserError: HEADROOM_BENCH_RUN_RATE: expected a number, got 'fast'$/);
  await assert.rejects(configured([], {}), /required option '--url <url>' not specified \(or set HEADROOM_BENCH_RUN_URL, or 'url' in --config\)/);
});

/** `headroom serve ARGS` in a child process; `ready` resolves when it serves, rejects if it exits first. */
function serveProcess(args: readonly string[], env: NodeJS.ProcessEnv): { proc: ReturnType<typeof spawn>; exited: Promise<number | null>; ready: Promise<void> } {
  const proc = spawn(process.execPath, ['bin/headroom.mjs', 'serve', ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  proc.stdout.on('data', (b: Buffer) => (out += b.toString()));
  proc.stderr.on('data', (b: Buffer) => (out += b.toString()));
  const exited = new Promise<number | null>((r) => proc.on('exit', (code) => r(code)));
  const ready = new Promise<void>((resolve, reject) => {
    const check = setInterval(() => {
      if (/serving /.test(out)) {
        clearInterval(check);
        resolve();
      }
    }, 50);
    void exited.then(() => {
      clearInterval(check);
      reject(new Error(`serve exited: ${out}`));
    });
  });
  return { proc, exited, ready };
}

async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const { port } = srv.address() as AddressInfo;
  await new Promise<void>((r) => srv.close(() => r()));
  return port;
}

test('serve: flag > env > file > default take effect, and /stats shows each source', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'headroom-serve-config-'));
  const file = join(dir, 'headroom.yaml');
  writeFileSync(file, ['slo-ms: 7000', 'maxQueued: 33', 'max-output-tokens: 55', 'metrics: false', ''].join('\n'));
  const port = await freePort();
  const env = cliEnv({ HEADROOM_PORT: String(port), HEADROOM_MAX_QUEUED: '44', HEADROOM_MAX_OUTPUT_TOKENS: '66' });
  const { proc, exited, ready } = serveProcess(['--runner', 'mock', '--host', '127.0.0.1', '--config', file, '--max-output-tokens', '99'], env);
  try {
    await ready;
    const base = `http://127.0.0.1:${port}`;
    const stats = (await (await fetch(`${base}/stats`)).json()) as { config: { file: string; options: Record<string, { value: unknown; source: string }> } };
    const o = stats.config.options;
    assert.equal(stats.config.file, file);
    assert.deepEqual(o['max-output-tokens'], { value: '99', source: 'flag' });
    assert.deepEqual(o['max-queued'], { value: '44', source: 'env' });
    assert.deepEqual(o['port'], { value: String(port), source: 'env' });
    assert.deepEqual(o['slo-ms'], { value: '7000', source: 'file' });
    assert.deepEqual(o['metrics'], { value: false, source: 'file' });
    assert.deepEqual(o['block-size'], { value: '16', source: 'default' });
    // In effect, not only reported: the flag's 99 bounds max_tokens, the file turned /metrics off.
    const models = (await (await fetch(`${base}/v1/models`)).json()) as { data: { id: string }[] };
    const model = models.data[0]!.id;
    const ask = (maxTokens: number): Promise<Response> =>
      fetch(`${base}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model, prompt: 'hi', max_tokens: maxTokens }) });
    assert.equal((await ask(99)).status, 200);
    assert.equal((await ask(100)).status, 400);
    assert.equal((await fetch(`${base}/metrics`)).status, 404);
  } finally {
    proc.kill('SIGTERM');
    await exited;
    rmSync(dir, { recursive: true, force: true });
  }
});

test('serve: an unknown key or a bad value in the file or env is one line naming it, exit 1', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'headroom-serve-bad-'));
  try {
    const file = join(dir, 'bad.yaml');
    writeFileSync(file, 'slo-ms: 7000\nmax-queud: 3\n');
    const cases: [string[], Record<string, string>, RegExp][] = [
      [['serve', '--config', file], {}, /^headroom: error: .*bad\.yaml: unknown key 'max-queud' \(did you mean 'max-queued'\?\)$/],
      [['serve', '--runner', 'mock'], { HEADROOM_PORT: 'abc' }, /^headroom: error: --port: expected an integer, got 'abc' \(from HEADROOM_PORT\)$/],
      [['serve'], { HEADROOM_SCHEDULER: 'lifo' }, /^headroom: error: HEADROOM_SCHEDULER: Allowed choices are fifo, static, continuous\. \(got 'lifo'\)$/],
      [['serve', '--config', join(dir, 'missing.yaml')], {}, /^headroom: error: --config: no such file: .*missing\.yaml$/],
    ];
    for (const [args, env, line] of cases) {
      const r = await runCli(args, env);
      assert.equal(r.code, 1, `${args.join(' ')}: ${r.stderr}`);
      assert.equal(r.stderr.trimEnd().split('\n').length, 1, r.stderr);
      assert.match(r.stderr.trimEnd(), line);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

/** Every list option of serve: a comma-separated env value and a file's list both give the list. */
const SERVE_LISTS: readonly { readonly flag: string; readonly values: (dir: string) => string[] }[] = [
  { flag: 'served-model-name', values: () => ['m1', 'm2'] },
  { flag: 'cors-origin', values: () => ['https://a.example', 'https://b.example:8443'] },
  { flag: 'dashboard-runs', values: (dir) => [join(dir, 'runs-a'), join(dir, 'runs-b')] },
];

for (const source of ['env', 'file'] as const) {
  test(`serve: every list option from the ${source === 'env' ? 'environment' : 'config file'} is a list, in effect`, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'headroom-lists-'));
    const { mkdirSync } = await import('node:fs');
    for (const o of SERVE_LISTS) if (o.flag === 'dashboard-runs') for (const d of o.values(dir)) mkdirSync(d);
    const port = await freePort();
    const extraEnv: Record<string, string> = { HEADROOM_PORT: String(port) };
    const args = ['--runner', 'mock', '--host', '127.0.0.1'];
    if (source === 'env') {
      for (const o of SERVE_LISTS) extraEnv[`HEADROOM_${o.flag.toUpperCase().replace(/-/g, '_')}`] = o.values(dir).join(',');
    } else {
      const file = join(dir, 'c.json');
      writeFileSync(file, JSON.stringify(Object.fromEntries(SERVE_LISTS.map((o) => [o.flag, o.values(dir)]))));
      args.push('--config', file);
    }
    const { proc, exited, ready } = serveProcess(args, cliEnv(extraEnv));
    try {
      await ready;
      const base = `http://127.0.0.1:${port}`;
      const stats = (await (await fetch(`${base}/stats`)).json()) as { config: { options: Record<string, { value: unknown; source: string }> } };
      for (const o of SERVE_LISTS) assert.deepEqual(stats.config.options[o.flag], { value: o.values(dir), source }, o.flag);
      // In effect: the names answer, the second origin is allowed.
      const models = (await (await fetch(`${base}/v1/models`)).json()) as { data: { id: string }[] };
      assert.deepEqual(models.data.map((m) => m.id), ['m1', 'm2']);
      const cors = await fetch(`${base}/v1/models`, { headers: { origin: 'https://b.example:8443' } });
      assert.equal(cors.headers.get('access-control-allow-origin'), 'https://b.example:8443');
    } finally {
      proc.kill('SIGTERM');
      await exited;
      rmSync(dir, { recursive: true, force: true });
    }
  });
}

/** Every list option of gateway (--upstream, and --cors-origin from the shared front door). */
for (const source of ['env', 'file'] as const) {
  test(`gateway: every list option from the ${source === 'env' ? 'environment' : 'config file'} is a list, in effect`, async () => {
    const { startTestServer } = await import('../helpers/headroom.ts');
    const upstreams = [await startTestServer(), await startTestServer()];
    const dir = mkdtempSync(join(tmpdir(), 'headroom-gateway-lists-'));
    const lists = { upstream: upstreams.map((u) => `${u.url}/v1`), 'cors-origin': ['https://a.example', 'https://b.example:8443'] };
    const extraEnv: Record<string, string> = {};
    const args = ['gateway', '--host', '127.0.0.1', '--port', '0'];
    if (source === 'env') {
      for (const [k, v] of Object.entries(lists)) extraEnv[`HEADROOM_GATEWAY_${k.toUpperCase().replace(/-/g, '_')}`] = v.join(',');
    } else {
      const file = join(dir, 'g.json');
      writeFileSync(file, JSON.stringify(lists));
      args.push('--config', file);
    }
    const gateway = spawnHeadroom(args, cliEnv(extraEnv));
    try {
      const url = (await gateway.waitFor(/gateway for \S+ on (http:\/\/[\d.:]+); ready/))[1]!;
      const stats = (await (await fetch(`${url}/stats`)).json()) as { config: { options: Record<string, { value: unknown; source: string }> }; gateway: { upstreams: unknown[] } };
      for (const [k, v] of Object.entries(lists)) assert.deepEqual(stats.config.options[k], { value: v, source }, k);
      // In effect: two upstreams in the pool, the second origin allowed.
      assert.equal(stats.gateway.upstreams.length, 2);
      const cors = await fetch(`${url}/v1/models`, { headers: { origin: 'https://b.example:8443' } });
      assert.equal(cors.headers.get('access-control-allow-origin'), 'https://b.example:8443');
    } finally {
      gateway.proc.kill('SIGTERM');
      await gateway.exited;
      for (const u of upstreams) await u.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
}
