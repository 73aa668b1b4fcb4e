// A real redis-server for the shared flow-control tests: started on a free port with no
// persistence, stopped (or killed, to play an outage) and restarted on the same port. Tests skip
// when the binary is missing, and fail instead under CI=true (.ci/run installs it).
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { connect } from 'node:net';
import type { TestContext } from 'node:test';

export { freePort } from './ports.ts';
import { freePort } from './ports.ts';

/** False (and the test skipped, or failed under CI=true) when redis-server is not installed. */
export function haveRedis(t: TestContext): boolean {
  try {
    execFileSync('redis-server', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    const why = 'the `redis-server` binary is not installed (apt-get install redis-server; .ci/run does this)';
    if (process.env['CI'] === 'true') assert.fail(why);
    t.skip(why);
    return false;
  }
}

export class RedisServer {
  readonly port: number;
  /** With a password, clients must AUTH (requirepass). */
  readonly password: string | null;
  #child: ChildProcess | null = null;

  private constructor(port: number, password: string | null) {
    this.port = port;
    this.password = password;
  }

  static async start(opts: { password?: string } = {}): Promise<RedisServer> {
    const s = new RedisServer(await freePort(), opts.password ?? null);
    await s.restart();
    return s;
  }

  get url(): string {
    return `redis://${this.password === null ? '' : `:${this.password}@`}127.0.0.1:${this.port}`;
  }

  /** Starts it (again) on the same port; resolves once it accepts connections. */
  async restart(): Promise<void> {
    if (this.#child !== null) throw new Error('RedisServer.restart: already running');
    const auth = this.password === null ? [] : ['--requirepass', this.password];
    this.#child = spawn('redis-server', ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', ...auth], { stdio: 'ignore' });
    const until = Date.now() + 10_000;
    while (!(await accepts(this.port))) {
      if (Date.now() > until) throw new Error(`redis-server did not listen on ${this.port} within 10 s`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  /** SIGSTOP / SIGCONT: a server that stops answering without closing its connections. */
  pause(): void {
    this.#child?.kill('SIGSTOP');
  }

  resume(): void {
    this.#child?.kill('SIGCONT');
  }

  /** SIGKILL: an outage, not a shutdown. */
  async kill(): Promise<void> {
    const child = this.#child;
    this.#child = null;
    if (child === null || child.exitCode !== null) return;
    const exited = new Promise<void>((r) => child.once('exit', () => r()));
    child.kill('SIGKILL');
    child.kill('SIGCONT');
    await exited;
  }
}

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1');
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}
