// How `headroom serve` ends: documented exit codes, and a startup failure as one line on stderr
// (no stack trace) naming what went wrong and what to do.
//
//   0  stopped cleanly: every in-flight request finished (drained)
//   1  could not start: a bad flag, the port in use, a model file missing or unreadable, the addon not built
//   2  the drain deadline passed: the requests still running were ended with an error
//   3  a second SIGINT/SIGTERM during the drain: exited at once
//  70  the engine's step loop failed (a bug): every held request ended with an error (EX_SOFTWARE)
import { AddonNotBuiltError } from '../engine/runner/llama/addon.ts';

export const EXIT_CODES = { drained: 0, startupFailure: 1, drainDeadline: 2, forced: 3, engineFailure: 70 } as const;

/** A startup failure meant for the user (a flag, a file): its message is the whole story. */
export class StartupError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'StartupError';
  }
}

/** One line describing why the server could not start. */
export function startupErrorLine(err: unknown, where: { host: string; port: number }): string {
  const e = err as NodeJS.ErrnoException;
  if (e?.code === 'EADDRINUSE') return `port ${where.port} on ${where.host} is already in use (pick another with --port)`;
  if (e?.code === 'EACCES' && e.syscall === 'listen') return `no permission to listen on ${where.host}:${where.port} (ports below 1024 need privileges)`;
  if (e?.code === 'EADDRNOTAVAIL') return `cannot listen on ${where.host}: no such local address (check --host)`;
  if (err instanceof StartupError || err instanceof AddonNotBuiltError) return err.message;
  const message = err instanceof Error ? err.message : String(err);
  return message.split('\n')[0]!;
}
