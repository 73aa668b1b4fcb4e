// Startup failures end in one line on stderr and exit code 1, never a stack trace; a busy port is
// found before any model loads (measured against the CLI's own start-up time, not a fixed bound).
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { spawnServe } from '../helpers/serve-process.ts';
import { ensureDefaultModel } from '../../src/model/default-model.ts';

async function failsWithOneLine(args: string[], line: RegExp): Promise<number> {
  const t0 = performance.now();
  const p = spawnServe(args);
  const { code, atMs } = await p.exited;
  const lines = p.stderr().trimEnd().split('\n');
  assert.equal(code, 1, `exit code for ${args.join(' ')}; output: ${p.output()}`);
  assert.equal(lines.length, 1, `more than one line for ${args.join(' ')}: ${p.stderr()}`);
  assert.match(lines[0]!, line);
  assert.doesNotMatch(p.stderr(), /\n\s+at /, 'a stack trace');
  return atMs - t0;
}

test('a busy port exits 1 with one line, before loading the model (within twice the CLI start-up time)', async () => {
  // Calibration: the same process start-up with nothing to do.
  const t0 = performance.now();
  const help = spawnServe(['--help']);
  const { code } = await help.exited;
  assert.equal(code, 0);
  const startupMs = performance.now() - t0;
  assert.match(help.output(), /Exit codes:/);
  assert.match(help.output(), /--drain-timeout-ms/);

  const blocker = createServer();
  await new Promise<void>((r) => blocker.listen(0, '127.0.0.1', r));
  const port = (blocker.address() as { port: number }).port;
  try {
    const ms = await failsWithOneLine(['--runner', 'llama', '--host', '127.0.0.1', '--port', String(port)], new RegExp(`^headroom: error: port ${port} on 127\\.0\\.0\\.1 is already in use`));
    // Before any model: the failure came from listen, not after 'loading the model' (no fixed time
    // bound: a loaded machine stretches both runs; the corrupt-model case below shows the order).
    assert.ok(ms < 2 * startupMs + 1000, `busy port took ${ms.toFixed(0)} ms to fail; plain start-up ${startupMs.toFixed(0)} ms`);
    console.log(`# busy port: exit after ${ms.toFixed(0)} ms; plain CLI start-up ${startupMs.toFixed(0)} ms`);
    // The port is taken before any model is read: with an unloadable model the port is still the reason.
    const dir = mkdtempSync(join(tmpdir(), 'headroom-busy-'));
    try {
      const corrupt = join(dir, 'corrupt.gguf');
      writeFileSync(corrupt, Buffer.from('GGUF not really'));
      await failsWithOneLine(['--model', corrupt, '--host', '127.0.0.1', '--port', String(port)], /is already in use/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  } finally {
    blocker.close();
  }
});

test('bad flags, a missing or corrupt model and --ctx beyond the trained context exit 1 with one line', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'headroom-startup-'));
  try {
    const corrupt = join(dir, 'corrupt.gguf');
    writeFileSync(corrupt, Buffer.concat([Buffer.from('GGUF'), Buffer.alloc(64, 0xab)]));
    // A real model cut short: its header and keys parse, its tensors do not fit.
    const truncated = join(dir, 'truncated.gguf');
    writeFileSync(truncated, readFileSync(await ensureDefaultModel()).subarray(0, 2_000_000));
    const cases: [string[], RegExp][] = [
      [['--port', 'abc'], /^headroom: error: --port: expected an integer, got 'abc'$/],
      [['--bogus'], /^headroom: error: unknown option '--bogus'/],
      [['--runner', 'gpu'], /^headroom: error: option '--runner <runner>' argument 'gpu' is invalid/],
      [['--runner', 'mock', '--min-slo-ms', '20000'], /^headroom: error: expected --min-slo-ms ≤ --slo-ms ≤ --max-slo-ms/],
      [['--model', join(dir, 'missing.gguf'), '--port', '0'], /^headroom: error: --model: file not found: /],
      // llama.cpp's own reason, not its generic last line.
      [['--model', corrupt, '--port', '0'], /^headroom: error: llama\.cpp could not load the model at .*corrupt\.gguf \(gguf_init_from_reader: failed to read (key-value pairs|header)/],
      [['--model', truncated, '--port', '0'], /^headroom: error: llama\.cpp could not load the model at .*truncated\.gguf \(.*(fail|error|bounds)/],
      [['--runner', 'mock', '--port', '0', '--cache-max-fraction', '1.5'], /^headroom: error: --cache-max-fraction: expected a number in \[0, 1\] or 'auto', got '1\.5'$/],
      [['--runner', 'mock', '--port', '0', '--inline-step-ms', '-1'], /^headroom: error: --inline-step-ms: expected a number of ms ≥ 0, got '-1'$/],
      [['--runner', 'mock', '--port', '0', '--pin-threads', 'yes'], /^headroom: error: option '--pin-threads <on\|off>' argument 'yes' is invalid/],
      [['--runner', 'mock', '--port', '0', '--inline-step-ms', '5', '--overlap-dispatch', 'on'], /^headroom: error: --inline-step-ms 5 with --overlap-dispatch on: .*pass --inline-step-ms 0$/],
      [['--ctx', '100000', '--port', '0', '--threads', '1'], /^headroom: error: --ctx: a context of 100000 tokens is longer than the model's trained context of 8192 .*--ctx-beyond-trained/],
    ];
    for (const [args, line] of cases) await failsWithOneLine(args, line);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
