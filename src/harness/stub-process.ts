// Runs the stub in its own Node process, so that the generator and the stub do not share an
// event loop: a slip measured against it is the generator's own.
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { StubOptions } from './stub-server.ts';

const BIN = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../bin/headroom.mjs');

export interface StubProcess {
  readonly url: string;
  readonly child: ChildProcess;
  stop(): Promise<void>;
}

export async function spawnStub(o: Partial<StubOptions>): Promise<StubProcess> {
  const args = [BIN, 'bench', 'stub', '--port', String(o.port ?? 0)];
  const flag = (name: string, v: number | undefined): void => {
    if (v !== undefined) args.push(name, String(v));
  };
  flag('--slots', o.slots);
  flag('--ttft-ms', o.ttftMs);
  flag('--token-ms', o.tokenMs);
  flag('--max-output-tokens', o.maxOutputTokens);
  flag('--queue-limit', o.queueLimit);
  flag('--retry-after-s', o.retryAfterS);
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  const url = await new Promise<string>((resolve, reject) => {
    let buf = '';
    const onData = (c: Buffer): void => {
      buf += c.toString();
      const m = /stub listening on (\S+)/.exec(buf);
      if (m?.[1] !== undefined) {
        child.stdout?.off('data', onData);
        resolve(m[1]);
      }
    };
    child.stdout?.on('data', onData);
    child.once('exit', (code) => reject(new Error(`stub exited early with code ${String(code)}`)));
  });
  return {
    url,
    child,
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}
