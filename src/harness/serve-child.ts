// A `headroom serve` child process for harness runs that need a fresh server per run (the CI gate,
// the ablation ladder): started on port 0, ready when it prints its "serving … ready" line (the
// URL is read from that line, so no port is ever guessed or shared), stopped with SIGTERM and a
// SIGKILL after 15 s so a drain that never ends cannot stall a sweep. Its stdout and stderr go to
// one log file beside the run's results.
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository root (the server's working directory, so relative paths in flags resolve there). */
export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const BIN = path.join(REPO_ROOT, 'bin/headroom.mjs');

export interface ServeChild {
  readonly url: string;
  readonly pid: number;
  /** Resolves when the process exits (with its code). */
  readonly exited: Promise<number | null>;
  stop(): Promise<void>;
}

/**
 * The parent's environment without HEADROOM_* variables: a server's configuration is its flags
 * (recorded with the run), never a variable that happened to be set in the shell that started a sweep.
 */
function inherited(): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('HEADROOM_')));
}

/** Starts `headroom serve <args>` (args must include `--port 0`) and resolves once it is ready. */
export async function startServe(args: readonly string[], logFile: string, env: Readonly<Record<string, string>> = {}): Promise<ServeChild> {
  const child: ChildProcess = spawn(process.execPath, [BIN, ...args], { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'], env: { ...inherited(), ...env } });
  const log = createWriteStream(logFile);
  let out = '';
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const url = await new Promise<string>((resolve, reject) => {
    const onData = (b: Buffer): void => {
      log.write(b);
      out += b.toString();
      const m = /serving .* on (http:\/\/[\d.:]+); ready/.exec(out);
      if (m?.[1] !== undefined) resolve(m[1]);
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    void exited.then((code) => reject(new Error(`headroom serve exited with code ${String(code)} before it was ready: ${out.trim().split('\n').at(-1) ?? ''}`)));
  });
  return {
    url,
    pid: child.pid ?? -1,
    exited,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        const killer = setTimeout(() => child.kill('SIGKILL'), 15_000);
        await exited;
        clearTimeout(killer);
      }
      await new Promise<void>((resolve) => log.end(() => resolve()));
    },
  };
}
