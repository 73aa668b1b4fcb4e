// How any `headroom` command ends on an error: one line on stderr, `headroom: error: <what>`, and
// exit status 1. A stack trace is printed only with --debug (or HEADROOM_DEBUG=1): a user's
// mistake (a bad flag value, a missing file) is never reported as a crash.
//
// Kept free of heavy imports: main.ts loads it before any command's modules.

/** A mistake the user can fix (a flag, a file, an unreachable server): its message is the whole story. */
export class UserError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'UserError';
  }
}

let debugRequested = false;

/** --debug was given (main.ts sets it): commands that print their own errors add the stack trace. */
export function debugEnabled(): boolean {
  return debugRequested;
}

export function enableDebug(): void {
  debugRequested = true;
}

/** Errors whose message already says what the user got wrong: no --debug hint after them. */
const USER_ERROR_NAMES = new Set(['UserError', 'StartupError', 'AddonNotBuiltError', 'InvalidArgumentError']);

/** The one line printed for `err` (without the `headroom: error: ` prefix). */
export function errorLine(err: unknown): string {
  const e = err as NodeJS.ErrnoException | null;
  if (e?.code === 'ENOENT' && typeof e.path === 'string') return `no such file or folder: ${e.path}`;
  if (e?.code === 'EACCES' && typeof e.path === 'string') return `permission denied: ${e.path}`;
  const message = err instanceof Error ? err.message : String(err);
  const first = message.split('\n')[0] ?? '';
  if (err instanceof Error && USER_ERROR_NAMES.has(err.name)) return first;
  return `${first} (run with --debug for the stack trace)`;
}

/** Prints the error as one line (plus the stack with `debug`) and sets exit status 1. */
export function reportError(err: unknown, debug: boolean): void {
  process.stderr.write(`headroom: error: ${errorLine(err)}\n`);
  if (debug && err instanceof Error && err.stack !== undefined) process.stderr.write(`${err.stack}\n`);
  process.exitCode = 1;
}
