// The processes a burst or a soak runs against, started the way an operator starts them
// (`headroom serve`, `headroom gateway`, as processes of their own, so their resident memory is
// theirs alone and a crash is an exit code). Info-level logs, as deployed: a request line each is
// part of what a burst costs. Output is kept only as a bounded tail, for the failure message.
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';

export interface ServerProcess {
  readonly name: string;
  readonly url: string;
  /** The --probe-port listener (/health, /ready, /metrics only). */
  readonly probeUrl: string;
  readonly pid: number;
  readonly proc: ChildProcess;
  /** The last few KiB of stdout and stderr. */
  tail(): string;
  /** Null while running; then the exit code or signal. */
  exit(): { code: number | null; signal: NodeJS.Signals | null } | null;
  /** SIGTERM (drain), then SIGKILL after `graceMs`. */
  stop(graceMs?: number): Promise<void>;
}

const TAIL_BYTES = 8192;

export interface StartOptions {
  /** The process's open-file limit (`ulimit -n`), to stage at a small scale what a larger burst meets at the machine's. */
  readonly fdLimit?: number;
  readonly readyTimeoutMs?: number;
}

/**
 * Starts `headroom <command> ...args` listening on a free loopback port, with its probe port on
 * another (as deploy/k8s probes it); resolves once it is ready.
 */
export function startServer(name: string, command: 'serve' | 'gateway', args: readonly string[], opts: StartOptions = {}): Promise<ServerProcess> {
  const readyTimeoutMs = opts.readyTimeoutMs ?? 60_000;
  const argv = [process.execPath, 'bin/headroom.mjs', command, '--host', '127.0.0.1', '--port', '0', '--probe-port', '0', ...args];
  // `exec` keeps the pid: the one whose memory is sampled is the server itself.
  const proc = opts.fdLimit === undefined ? spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'pipe', 'pipe'] }) : spawn('/bin/sh', ['-c', `ulimit -n ${opts.fdLimit} && exec "$@"`, 'sh', ...argv], { stdio: ['ignore', 'pipe', 'pipe'] });
  let tail = '';
  let exit: { code: number | null; signal: NodeJS.Signals | null } | null = null;
  const exited = new Promise<void>((resolve) =>
    proc.once('exit', (code, signal) => {
      exit = { code, signal };
      resolve();
    }),
  );
  return new Promise((resolve, reject) => {
    let ready = false;
    const timer = setTimeout(() => fail(`not ready within ${readyTimeoutMs} ms`), readyTimeoutMs);
    const fail = (why: string): void => {
      if (ready) return;
      ready = true;
      clearTimeout(timer);
      proc.kill('SIGKILL');
      reject(new Error(`${name}: ${why}; output: ${tail}`));
    };
    const onData = (b: Buffer): void => {
      tail = (tail + b.toString()).slice(-TAIL_BYTES);
      const m = / on (http:\/\/[0-9.:]+); ready/.exec(tail);
      const probes = /probes \([^)]*\) at (http:\/\/[0-9.:]+)/.exec(tail);
      if (ready || m === null) return;
      if (probes === null) {
        fail('ready without a probe port line');
        return;
      }
      ready = true;
      clearTimeout(timer);
      resolve({
        name,
        url: m[1]!,
        probeUrl: probes[1]!,
        pid: proc.pid!,
        proc,
        tail: () => tail,
        exit: () => exit,
        stop: async (graceMs = 5000) => {
          if (exit !== null) return;
          proc.kill('SIGTERM');
          const t = setTimeout(() => proc.kill('SIGKILL'), graceMs);
          await exited;
          clearTimeout(t);
        },
      });
    };
    proc.stdout.on('data', onData);
    proc.stderr.on('data', onData);
    void exited.then(() => fail(`exited (${JSON.stringify(exit)}) before it was ready`));
  });
}

/** The caps both modes of the burst run under: a small capacity bound and a short flow queue. */
export interface Caps {
  readonly maxInflightRequests: number;
  readonly flowQueueSize: number;
  readonly flowQueueTtlMs: number;
}

export function capArgs(caps: Caps): string[] {
  return ['--max-inflight-requests', String(caps.maxInflightRequests), '--flow-queue-size', String(caps.flowQueueSize), '--flow-queue-ttl-ms', String(caps.flowQueueTtlMs)];
}

/**
 * Engine mode: one mock-runner `serve` with the caps. Gateway mode: a mock-runner `serve` with its
 * defaults behind a `gateway` with the caps. The first process is the one the burst hits; `opts`
 * apply to it (the upstream only ever sees the gateway's connections).
 */
export async function startTarget(mode: 'engine' | 'gateway', caps: Caps, extra: readonly string[] = [], opts: StartOptions = {}): Promise<ServerProcess[]> {
  if (mode === 'engine') return [await startServer('engine', 'serve', ['--runner', 'mock', ...capArgs(caps), ...extra], opts)];
  const upstream = await startServer('upstream', 'serve', ['--runner', 'mock']);
  try {
    const gateway = await startServer('gateway', 'gateway', ['--upstream', upstream.url, ...capArgs(caps), ...extra], opts);
    return [gateway, upstream];
  } catch (e) {
    await upstream.stop();
    throw e;
  }
}
