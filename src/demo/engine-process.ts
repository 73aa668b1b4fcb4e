// One engine of the demo: a `headroom serve` child process on a port of its own, found ready by
// its "...; ready" log line, as harness/serve-child.ts finds the gate's and the ladder's servers.
// Not that helper itself: the demo's engines run detached with an exit hook (below), keep their
// last lines in memory instead of a log file, and are killed after 5 s, not 15.
//
// Why a child process and not two engines in the demo's own process: each engine's step loop,
// HTTP server and admission controller then have an event loop to themselves, as in production,
// and the load generator's timing (measured from intended arrival) is not shared with either.
//
// Lifetimes: children are spawned detached (their own process group), so a Ctrl-C in the terminal
// reaches the demo only and the demo stops them in order — load first, then SIGTERM, then SIGKILL
// after `graceMs`. If the demo exits any other way, an 'exit' hook SIGKILLs whatever is left, so
// no engine outlives it. (A SIGKILL of the demo itself cannot be caught; its children would stay.)
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import path from 'node:path';
import { REPO_ROOT } from '../harness/serve-child.ts';

const BIN = path.join(REPO_ROOT, 'bin/headroom.mjs');
/** Log lines kept per engine, for the message when one fails. */
const KEEP_LINES = 20;

export interface EngineSpec {
  /** Shown on the page and in messages, e.g. 'admission off'. */
  readonly name: string;
  /** `headroom serve` flags (host and port are added: 127.0.0.1, any free port). */
  readonly args: readonly string[];
}

export interface EngineProcess {
  readonly name: string;
  readonly pid: number;
  readonly url: string;
  /** Resolves with the exit code (null: killed by a signal) when the process ends. */
  readonly exited: Promise<number | null>;
  /** The last log lines (stdout and stderr), for error messages. */
  lastLines(): string[];
  /** SIGTERM, SIGKILL after `graceMs`; resolves when the process is gone. Idempotent. */
  stop(graceMs?: number): Promise<void>;
}

const live = new Set<ChildProcess>();
let hooked = false;

/** Starts `headroom serve` with the spec's flags and resolves once it is ready (rejects if it exits or times out first). */
export async function startEngine(spec: EngineSpec, readyTimeoutMs: number): Promise<EngineProcess> {
  if (!hooked) {
    hooked = true;
    process.on('exit', () => {
      for (const c of live) c.kill('SIGKILL');
    });
  }
  const child = spawn(process.execPath, [BIN, 'serve', '--host', '127.0.0.1', '--port', '0', ...spec.args], { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  live.add(child);
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => {
    live.delete(child);
    resolve(code);
  }));
  const lines: string[] = [];
  let partial = '';
  let onLine: ((line: string) => void) | null = null;
  const onData = (b: Buffer): void => {
    const parts = (partial + b.toString()).split('\n');
    partial = parts.pop() ?? '';
    for (const line of parts) {
      lines.push(line);
      if (lines.length > KEEP_LINES) lines.shift();
      onLine?.(line);
    }
  };
  child.stdout?.on('data', onData);
  child.stderr?.on('data', onData);
  const stop = async (graceMs = 5000): Promise<void> => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    const killer = setTimeout(() => child.kill('SIGKILL'), graceMs);
    await exited;
    clearTimeout(killer);
  };
  let url: string;
  try {
    url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${spec.name}: not ready after ${Math.round(readyTimeoutMs / 1000)} s`)), readyTimeoutMs);
      onLine = (line) => {
        const m = /serving .* on (http:\/\/[\d.:]+); ready/.exec(line);
        if (m?.[1] === undefined) return;
        clearTimeout(timer);
        resolve(m[1]);
      };
      void exited.then((code) => {
        clearTimeout(timer);
        reject(new Error(`${spec.name}: headroom serve exited with code ${String(code)} before it was ready: ${lastError(lines)}`));
      });
    });
  } catch (err) {
    await stop(1000);
    throw err;
  } finally {
    onLine = null;
  }
  if (child.pid === undefined) throw new Error(`${spec.name}: bug: a ready child without a pid`);
  return { name: spec.name, pid: child.pid, url, exited, lastLines: () => [...lines], stop };
}

/** The most telling of an engine's last lines: its `headroom: error:` line if any, else the last one. */
function lastError(lines: readonly string[]): string {
  return [...lines].reverse().find((l) => l.startsWith('headroom: error:')) ?? lines.at(-1) ?? '(no output)';
}
