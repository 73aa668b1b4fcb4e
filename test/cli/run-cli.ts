// Runs the real `headroom` CLI (bin/headroom.mjs) to completion, with its own environment, for the
// tests of errors, --version and configuration. Not a test file (no .test.ts).
import { spawn } from 'node:child_process';

export interface CliResult {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
  /** Wall time from spawn to exit, ms (reported, never asserted against a fixed bound). */
  readonly ms: number;
}

/** Environment without any HEADROOM_* variable of the test runner's own, plus `env`. */
export function cliEnv(env: Record<string, string> = {}): NodeJS.ProcessEnv {
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('HEADROOM_')));
  return { ...base, ...env };
}

export function runCli(args: readonly string[], env: Record<string, string> = {}, timeoutMs = 60_000): Promise<CliResult> {
  const t0 = performance.now();
  const proc = spawn(process.execPath, ['bin/headroom.mjs', ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: cliEnv(env) });
  let stdout = '';
  let stderr = '';
  proc.stdout.on('data', (b: Buffer) => (stdout += b.toString()));
  proc.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
  const timer = setTimeout(() => proc.kill('SIGKILL'), timeoutMs);
  return new Promise((resolve) =>
    proc.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr, ms: performance.now() - t0 });
    }),
  );
}
