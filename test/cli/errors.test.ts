// The CLI's user-facing failures, through the real `bin/headroom.mjs`: every mistake is one line on
// stderr (`headroom: error: ...`), exit status 1, never a stack trace unless --debug; --version;
// a typo'd command names the nearest one; bench run against a closed port fails before any load.
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { runCli } from './run-cli.ts';

async function failsWithOneLine(args: string[], line: RegExp, env: Record<string, string> = {}): Promise<void> {
  const r = await runCli(args, env);
  const lines = r.stderr.trimEnd().split('\n');
  assert.equal(r.code, 1, `exit code for ${args.join(' ')}; stderr: ${r.stderr}`);
  assert.equal(lines.length, 1, `more than one line for ${args.join(' ')}: ${r.stderr}`);
  assert.match(lines[0]!, line);
  assert.doesNotMatch(r.stderr, /\n\s+at /, 'a stack trace');
}

/** A port with nothing listening on it. */
async function closedPort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const { port } = srv.address() as AddressInfo;
  await new Promise<void>((r) => srv.close(() => r()));
  return port;
}

test('--version prints the package version and exits 0', async () => {
  const { version } = JSON.parse(readFileSync('package.json', 'utf8')) as { version: string };
  const r = await runCli(['--version']);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout.trim(), `headroom ${version}`);
});

test('an unknown command is named, with the nearest command, not read as serve with a stray argument', async () => {
  await failsWithOneLine(['srve'], /^headroom: error: unknown command 'srve' \(did you mean 'serve'\?\)/);
  await failsWithOneLine(['bench', 'rn'], /^headroom: error: unknown command 'rn' \(Did you mean run\?\) \(see headroom bench --help\)$/);
});

test('bad flag values, missing files and folders: one line, exit 1, no stack trace', async () => {
  const cases: [string[], RegExp][] = [
    [['bench', 'run', '--url', 'http://127.0.0.1:1', '--rate', 'abc'], /^headroom: error: option '--rate <rps>' argument 'abc' is invalid\. expected a number, got 'abc' \(see headroom bench run --help\)$/],
    [['bench', 'run', '--url', 'http://127.0.0.1:1', '--header', 'no-colon'], /argument 'no-colon' is invalid\. expected 'name: value'/],
    [['bench', 'run'], /^headroom: error: required option '--url <url>' not specified \(or set HEADROOM_BENCH_RUN_URL/],
    [['bench', 'report', 'no/such/folder'], /^headroom: error: no\/such\/folder: not a result folder/],
    [['admission', 'evaluate', '--traces', 'no/such/traces'], /^headroom: error: no such file or folder: no\/such\/traces$/],
    [['calibrate', '--model', 'no/such.gguf'], /^headroom: error: model file not found: no\/such\.gguf$/],
    [['serve', '--model', 'no/such.gguf'], /^headroom: error: --model: file not found: no\/such\.gguf$/],
    [['serve', '--port', 'abc'], /^headroom: error: --port: expected an integer, got 'abc'$/],
    [['serve', '--scheduler', 'lifo'], /^headroom: error: option '--scheduler <name>' argument 'lifo' is invalid\. Allowed choices are fifo, static, continuous\./],
  ];
  for (const [args, line] of cases) await failsWithOneLine(args, line);
});

test('--debug adds the stack trace to the one line', async () => {
  const r = await runCli(['serve', '--port', 'abc', '--debug']);
  assert.equal(r.code, 1);
  assert.match(r.stderr, /^headroom: error: --port: expected an integer, got 'abc'\n/);
  assert.match(r.stderr, /\n\s+at /);
});

test('bench run against a closed port exits 1 at once, before drawing a schedule or writing results', async () => {
  const port = await closedPort();
  const r = await runCli(['bench', 'run', '--url', `http://127.0.0.1:${port}`, '--rate', '5', '--duration-s', '600', '--out', 'results/runs/never-written']);
  assert.equal(r.code, 1, r.stderr);
  assert.match(r.stderr.trimEnd(), new RegExp(`^headroom: error: cannot reach http://127\\.0\\.0\\.1:${port} \\(ECONNREFUSED[^\\n]*is the server running\\?$`));
  // A 600 s run that had started would still be running (runCli kills it after 60 s: code null),
  // and its schedule would be on disk.
  assert.equal(existsSync('results/runs/never-written'), false);
  console.log(`closed port: exit after ${r.ms.toFixed(0)} ms`);
});
