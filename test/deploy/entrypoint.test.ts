// The image's entrypoint (deploy/entrypoint.sh) run as a plain process, the way the container runs
// it: executed through its shebang, configured only by environment, with the tiny model the image
// bakes (its sha256 checked) and one llama.cpp thread derived from a CPU limit. It must exec node,
// so SIGTERM reaches the server and drains it (exit 0); the Dockerfile's HEALTHCHECK command
// passes against it; gateway mode serves through an engine started the same way. No container
// engine is involved: this is what can be run of the image on a machine without one.
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import type { ChildProcessWithoutNullStreams } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { test } from 'node:test';
import { request } from 'undici';
import { cliEnv } from '../cli/run-cli.ts';
import { DEFAULT_MODEL_PATH, ensureDefaultModel } from '../../src/model/default-model.ts';

const ENTRYPOINT = 'deploy/entrypoint.sh';

interface Proc {
  readonly proc: ChildProcessWithoutNullStreams;
  output(): string;
  waitFor(re: RegExp, timeoutMs?: number): Promise<RegExpExecArray>;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** SIGKILL to the whole process group: also whatever a broken entrypoint left running beside itself. */
  kill(): void;
}

/**
 * Runs the entrypoint as the image does (its own shebang), with only `env` (listening on a free
 * loopback port unless `env` says otherwise) and a PATH that finds this node. In its own process
 * group, so `kill()` also ends a server that a broken entrypoint started without exec.
 */
function entrypoint(env: Record<string, string>, args: readonly string[] = []): Proc {
  const path = `${dirname(process.execPath)}:${process.env.PATH ?? ''}`;
  const listen = { HEADROOM_HOST: '127.0.0.1', HEADROOM_PORT: '0', HEADROOM_GATEWAY_HOST: '127.0.0.1', HEADROOM_GATEWAY_PORT: '0' };
  const proc = spawn(ENTRYPOINT, args, { stdio: ['pipe', 'pipe', 'pipe'], env: cliEnv({ PATH: path, ...listen, ...env }), detached: true });
  let out = '';
  const waiters = new Set<() => void>();
  const onData = (b: Buffer): void => {
    out += b.toString();
    for (const w of waiters) w();
  };
  proc.stdout.on('data', onData);
  proc.stderr.on('data', onData);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => proc.on('exit', (code, signal) => resolve({ code, signal })));
  return {
    proc,
    output: () => out,
    exited,
    kill: () => {
      try {
        process.kill(-proc.pid!, 'SIGKILL');
      } catch {
        // the group is gone already
      }
    },
    waitFor: (re, timeoutMs = 60_000) =>
      new Promise((resolve, reject) => {
        const check = (): void => {
          const m = re.exec(out);
          if (m === null) return;
          waiters.delete(check);
          clearTimeout(timer);
          resolve(m);
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`no ${String(re)} within ${timeoutMs} ms; output: ${out}`));
        }, timeoutMs);
        waiters.add(check);
        void exited.then(() => {
          if (!waiters.has(check)) return;
          waiters.delete(check);
          clearTimeout(timer);
          reject(new Error(`exited before ${String(re)}; output: ${out}`));
        });
        check();
      }),
  };
}

function cpuMaxFile(dir: string, content: string): string {
  const file = join(dir, `cpu.max-${content.replace(/\s+/g, '_')}`);
  writeFileSync(file, `${content}\n`);
  return file;
}

/** The expected sha256 of the baked model, from the file the Dockerfile checks it against. */
function committedModelSha256(): string {
  const line = readFileSync('deploy/models.sha256', 'utf8').trim();
  const m = /^([0-9a-f]{64}) {2}models\/tiny\.gguf$/.exec(line);
  assert.ok(m, `deploy/models.sha256: expected '<sha256>  models/tiny.gguf', got '${line}'`);
  return m[1]!;
}

/** The Dockerfile's HEALTHCHECK command (shell form), as Docker would run it in the container. */
function healthcheckCommand(): string {
  const text = readFileSync('Dockerfile', 'utf8').replace(/\\\n\s*/g, '');
  const m = /^HEALTHCHECK .*?\bCMD (.+)$/m.exec(text);
  assert.ok(m, 'the Dockerfile has no HEALTHCHECK ... CMD line');
  return m[1]!;
}

function runHealthcheck(env: Record<string, string>): number {
  try {
    execFileSync('/bin/sh', ['-c', healthcheckCommand()], { env: cliEnv({ PATH: `${dirname(process.execPath)}:${process.env.PATH ?? ''}`, ...env }), stdio: 'ignore' });
    return 0;
  } catch (err) {
    return (err as { status: number | null }).status ?? -1;
  }
}

test('the generator still makes the model whose sha256 the image checks (deploy/models.sha256)', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'headroom-deploy-model-'));
  try {
    const path = await ensureDefaultModel(join(dir, 'tiny.gguf'));
    const have = createHash('sha256').update(readFileSync(path)).digest('hex');
    assert.equal(have, committedModelSha256(), 'the default model changed: update deploy/models.sha256 (the Dockerfile checks the baked model against it)');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('threads come from the CPU limit (cgroup cpu.max), rounded up and capped at the CPUs available; HEADROOM_THREADS wins', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'headroom-deploy-cpu-'));
  const cpus = availableParallelism();
  try {
    const cases: [string, number][] = [
      ['100000 100000', 1],
      ['50000 100000', 1],
      ['150000 100000', Math.min(2, cpus)],
      ['6400000 100000', cpus],
      ['max 100000', cpus],
    ];
    for (const [content, want] of cases) {
      const p = entrypoint({ HEADROOM_CGROUP_CPU_MAX: cpuMaxFile(dir, content) }, ['--help']);
      const { code } = await p.exited;
      assert.equal(code, 0, p.output());
      assert.match(p.output(), new RegExp(`engine mode: ${want} llama\\.cpp threads`), `cpu.max '${content}'`);
    }
    const p = entrypoint({ HEADROOM_CGROUP_CPU_MAX: cpuMaxFile(dir, '100000 100000'), HEADROOM_THREADS: '3' }, ['--help']);
    assert.equal((await p.exited).code, 0);
    assert.match(p.output(), /engine mode: 3 llama\.cpp threads \(HEADROOM_THREADS\)/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a model whose sha256 is not HEADROOM_MODEL_SHA256 stops the container with exit 1 before node starts', async () => {
  const p = entrypoint({ HEADROOM_MODEL: await ensureDefaultModel(), HEADROOM_MODEL_SHA256: '0'.repeat(64), HEADROOM_THREADS: '1' });
  const timer = setTimeout(() => p.kill(), 30_000);
  const { code } = await p.exited;
  clearTimeout(timer);
  assert.equal(code, 1, p.output());
  assert.match(p.output(), /has sha256 [0-9a-f]{64}, expected 0{64}/);
  assert.doesNotMatch(p.output(), /"level"/, 'the server started');
});

test('gateway mode: a HEADROOM_GATEWAY_OLD_SPACE_MB that is not a whole number stops the container with exit 1 before node starts', async () => {
  const p = entrypoint({ HEADROOM_MODE: 'gateway', HEADROOM_GATEWAY_OLD_SPACE_MB: '256MB' });
  const timer = setTimeout(() => p.kill(), 30_000);
  const { code } = await p.exited;
  clearTimeout(timer);
  assert.equal(code, 1, p.output());
  assert.match(p.output(), /HEADROOM_GATEWAY_OLD_SPACE_MB: expected a whole number of MB, got '256MB'/);
  assert.doesNotMatch(p.output(), /"level"/, 'the gateway started');
});

test('engine mode: the tiny model on one thread from the CPU limit, /ready, the HEALTHCHECK, then SIGTERM drains a running stream and exits 0', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'headroom-deploy-engine-'));
  const model = await ensureDefaultModel(DEFAULT_MODEL_PATH);
  const p = entrypoint({
    HEADROOM_MODEL: model,
    HEADROOM_MODEL_SHA256: committedModelSha256(),
    HEADROOM_CGROUP_CPU_MAX: cpuMaxFile(dir, '100000 100000'),
    HEADROOM_DRAIN_TIMEOUT_MS: '60000',
  });
  try {
    const url = (await p.waitFor(/serving .* on (http:\/\/[\d.:]+); ready/, 120_000))[1]!;
    const port = new URL(url).port;
    assert.equal((await request(`${url}/ready`)).statusCode, 200);
    const stats = (await (await request(`${url}/stats`)).body.json()) as { runner?: unknown; config: { options: Record<string, { value: unknown; source: string }> } };
    assert.deepEqual(stats.config.options['threads'], { value: '1', source: 'env' });
    assert.equal(runHealthcheck({ HEADROOM_PORT: port }), 0, 'the HEALTHCHECK command failed against a ready server');

    const res = await request(`${url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'tiny', prompt: 'the river', max_tokens: 48, ignore_eos: true, stream: true }) });
    assert.equal(res.statusCode, 200);
    let body = '';
    let signalled = false;
    for await (const chunk of res.body) {
      body += (chunk as Buffer).toString();
      if (!signalled && body.includes('data: ')) {
        signalled = true;
        p.proc.kill('SIGTERM'); // what `docker stop` and the kubelet send to PID 1
        await p.waitFor(/SIGTERM: draining/, 10_000);
        assert.equal((await request(`${url}/ready`)).statusCode, 503, '/ready during the drain');
      }
    }
    assert.ok(signalled);
    assert.ok(body.trimEnd().endsWith('data: [DONE]'), 'the stream did not finish');
    assert.doesNotMatch(body, /"error"/, 'the drain cut the stream');
    const { code, signal } = await p.exited;
    assert.deepEqual({ code, signal }, { code: 0, signal: null }, p.output());
    assert.match(p.output(), /drained; exiting/);
    assert.notEqual(runHealthcheck({ HEADROOM_PORT: port }), 0, 'the HEALTHCHECK passed with nothing listening');
  } finally {
    p.kill();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('gateway mode: the entrypoint fronts an engine started the same way (upstreams from a config file); SIGTERM drains both, exit 0', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'headroom-deploy-gateway-'));
  const engine = entrypoint({ HEADROOM_RUNNER: 'mock', HEADROOM_THREADS: '1' });
  let gateway: Proc | null = null;
  try {
    const engineUrl = (await engine.waitFor(/serving .* on (http:\/\/[\d.:]+); ready/))[1]!;
    const config = join(dir, 'gateway.yaml');
    writeFileSync(config, `upstream:\n  - ${engineUrl}\nhealth-interval-ms: 200\n`);
    gateway = entrypoint({ HEADROOM_MODE: 'gateway', HEADROOM_GATEWAY_CONFIG: config });
    const url = (await gateway.waitFor(/gateway for headroom-mock on (http:\/\/[\d.:]+); ready/))[1]!;
    assert.match(gateway.output(), /headroom-entrypoint: gateway mode \(node --initial-old-space-size=256\)/);
    // exec: the entrypoint's pid is node's, started with the flag.
    const argv = readFileSync(`/proc/${gateway.proc.pid}/cmdline`, 'utf8').split('\0');
    assert.ok(argv.includes('--initial-old-space-size=256'), `gateway argv: ${argv.join(' ')}`);
    assert.equal(runHealthcheck({ HEADROOM_GATEWAY_PORT: new URL(url).port }), 0, 'the HEALTHCHECK failed against a ready gateway');
    const res = await request(`${url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'headroom-mock', prompt: 'hello', max_tokens: 5 }) });
    assert.equal(res.statusCode, 200);
    assert.equal(((await res.body.json()) as { usage: { completion_tokens: number } }).usage.completion_tokens, 5);
    const stats = (await (await request(`${url}/stats`)).body.json()) as { mode: string };
    assert.equal(stats.mode, 'gateway');

    gateway.proc.kill('SIGTERM');
    assert.deepEqual(await gateway.exited, { code: 0, signal: null }, gateway.output());
    engine.proc.kill('SIGTERM');
    assert.deepEqual(await engine.exited, { code: 0, signal: null }, engine.output());
  } finally {
    gateway?.kill();
    engine.kill();
    rmSync(dir, { recursive: true, force: true });
  }
});
