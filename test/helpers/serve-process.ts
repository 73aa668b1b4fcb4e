// Spawns a real `headroom serve` (or any `headroom` command) process for tests of the CLI and its
// lifecycle (signals, exit codes).
import { spawn } from 'node:child_process';
import type { ChildProcessWithoutNullStreams } from 'node:child_process';

export interface ServeProcess {
  readonly proc: ChildProcessWithoutNullStreams;
  /** stdout and stderr so far, interleaved. */
  output(): string;
  stderr(): string;
  /** Resolves with the first match of `re` in the output (rejects after `timeoutMs`). */
  waitFor(re: RegExp, timeoutMs?: number): Promise<RegExpExecArray>;
  /** Resolves with the exit code and when it came (performance.now()). */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; atMs: number }>;
}

export function spawnServe(args: readonly string[], env?: NodeJS.ProcessEnv): ServeProcess {
  return spawnHeadroom(['serve', ...args], env);
}

/** `headroom <args>`, e.g. ['demo', '--runner', 'mock'], in `env` (this process's by default). */
export function spawnHeadroom(args: readonly string[], env: NodeJS.ProcessEnv = process.env): ServeProcess {
  const proc = spawn(process.execPath, ['bin/headroom.mjs', ...args], { stdio: ['pipe', 'pipe', 'pipe'], env });
  let out = '';
  let err = '';
  const listeners = new Set<() => void>();
  const onData = (): void => {
    for (const l of listeners) l();
  };
  proc.stdout.on('data', (b: Buffer) => {
    out += b.toString();
    onData();
  });
  proc.stderr.on('data', (b: Buffer) => {
    out += b.toString();
    err += b.toString();
    onData();
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; atMs: number }>((resolve) => proc.on('exit', (code, signal) => resolve({ code, signal, atMs: performance.now() })));
  return {
    proc,
    output: () => out,
    stderr: () => err,
    exited,
    waitFor: (re, timeoutMs = 30_000) =>
      new Promise((resolve, reject) => {
        const check = (): void => {
          const m = re.exec(out);
          if (m !== null) {
            listeners.delete(check);
            clearTimeout(timer);
            resolve(m);
          }
        };
        const timer = setTimeout(() => {
          listeners.delete(check);
          reject(new Error(`no ${String(re)} within ${timeoutMs} ms; output: ${out}`));
        }, timeoutMs);
        listeners.add(check);
        void exited.then(() => setTimeout(() => {
          if (listeners.has(check)) {
            listeners.delete(check);
            clearTimeout(timer);
            reject(new Error(`the process exited before ${String(re)}; output: ${out}`));
          }
        }, 50));
        check();
      }),
  };
}
