// Start-up stays light: `--help`, `--version`, a command's help and a bad flag load no server
// (fastify), DuckDB or OpenTelemetry module — they are imported inside the actions that use them.
// Checked by what is imported (a resolve hook), not by time: the time is reported only.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { test } from 'node:test';
import { cliEnv } from './run-cli.ts';

const TRACE = './test/cli/fixtures/trace-heavy-imports.mjs';

function heavyImports(args: readonly string[]): Promise<{ heavy: string[]; ms: number; output: string }> {
  const t0 = performance.now();
  const proc = spawn(process.execPath, ['--import', TRACE, 'bin/headroom.mjs', ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: cliEnv() });
  let out = '';
  proc.stdout.on('data', (b: Buffer) => (out += b.toString()));
  proc.stderr.on('data', (b: Buffer) => (out += b.toString()));
  const timer = setTimeout(() => proc.kill('SIGKILL'), 60_000);
  return new Promise((resolve) =>
    proc.on('close', () => {
      clearTimeout(timer);
      const heavy = out.split('\n').filter((l) => l.startsWith('heavy-import '));
      resolve({ heavy, ms: performance.now() - t0, output: out });
    }),
  );
}

test('help, version and flag errors import no server, DuckDB or OpenTelemetry code', async () => {
  for (const args of [['--help'], ['--version'], ['serve', '--help'], ['bench', 'run', '--help'], ['bench', 'report', '--help'], ['serve', '--port', 'abc'], ['bench', 'run', '--url', 'http://x', '--rate', 'x']]) {
    const r = await heavyImports(args);
    assert.deepEqual(r.heavy, [], `${args.join(' ')} imported: ${r.heavy.join(', ')}`);
    console.log(`${args.join(' ')}: ${r.ms.toFixed(0)} ms`);
  }
});

test('the import trace sees heavy modules when a command does load them', async () => {
  // Listening on an address that is not local fails after the server is built: fastify is loaded.
  const r = await heavyImports(['serve', '--runner', 'mock', '--host', '10.255.255.1', '--port', '0']);
  assert.ok(r.heavy.some((l) => l.includes('/fastify/')), `no fastify import seen: ${r.output}`);
});
