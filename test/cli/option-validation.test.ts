// Every option of `serve`, `gateway`, `bench run|report|stub|validate|max-rate` and `ladder` rejects
// a bad value before the command does anything (listens, sends, runs), with one line on stderr that
// names the flag, and exit status 1. The options come from each command's own table
// (src/cli/option-table.ts), so an option is covered as soon as it is declared: its bad value is
// the first of CANDIDATES its parser rejects, a choice's is 'bogus', a flag's an environment value
// that is no boolean. An option whose parser takes every candidate must say here what else rejects
// a value (LATER_CHECKS) or why any value is fine (ANY_VALUE). Each case is a real process
// (bin/headroom.mjs), four at a time.
import assert from 'node:assert/strict';
import { existsSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { Command } from 'commander';
import { BENCH_MAX_RATE_OPTIONS, BENCH_REPORT_OPTIONS, BENCH_RUN_OPTIONS, BENCH_STUB_OPTIONS, BENCH_VALIDATE_OPTIONS } from '../../src/cli/commands/bench-options.ts';
import { registerBenchCommands } from '../../src/cli/commands/bench.ts';
import { GATEWAY_OPTIONS } from '../../src/cli/commands/gateway-options.ts';
import { registerGatewayCommand } from '../../src/cli/commands/gateway.ts';
import { LADDER_OPTIONS, registerLadderCommand } from '../../src/cli/commands/ladder.ts';
import { SERVE_OPTIONS } from '../../src/cli/commands/serve-options.ts';
import { registerServeCommand } from '../../src/cli/commands/serve.ts';
import { envName } from '../../src/cli/config.ts';
import type { OptionSpec } from '../../src/cli/option-table.ts';
import { runCli } from './run-cli.ts';

/** Tried in order on each option's parser: numbers out of most ranges first, then text, an empty list item, nothing. */
const CANDIDATES = ['-1', '0', '1.5', '70000', 'abc', ',', ''];

/** Values a parser accepts that a later check (the filesystem, a shared validator) rejects before listening. */
const LATER_CHECKS: Readonly<Record<string, string>> = {
  'trace-out': '/proc/self/headroom-trace.jsonl',
  record: '/proc/self/headroom-record',
  'admission-state': '/proc/self/headroom-state',
  'cors-origin': 'not an origin',
  'served-model-name': 'two words',
};

/** Options any value of which is acceptable, and why. */
const ANY_VALUE: Readonly<Record<string, string>> = {
  host: 'a name is resolved when the port is bound',
  'upstream-api-key': 'a key is any text',
  'api-key': 'a key is any text',
  model: 'bench run: a model name is any text the target knows',
  out: 'a folder or file the command creates',
  report: 'a file the command creates',
};

const scratch = join(tmpdir(), 'headroom-option-validation-never');

interface CommandCase {
  readonly path: readonly string[];
  readonly table: readonly OptionSpec[];
  readonly register: (program: Command) => void;
  /** Options that make a run that got past its flags stop at once, or show that it did not stop (listening, exit 0). */
  readonly base: Readonly<Record<string, string>>;
  readonly extra?: readonly string[];
}

const COMMANDS: readonly CommandCase[] = [
  { path: ['serve'], table: SERVE_OPTIONS, register: registerServeCommand, base: { runner: 'mock', host: '127.0.0.1', port: '0' } },
  { path: ['gateway'], table: GATEWAY_OPTIONS, register: registerGatewayCommand, base: { upstream: 'http://127.0.0.1:9', host: '127.0.0.1', port: '0' } },
  // A closed port: past its flags, bench run fails with "cannot reach", which names no flag.
  { path: ['bench', 'run'], table: BENCH_RUN_OPTIONS, register: registerBenchCommands, base: { url: 'http://127.0.0.1:9', out: join(scratch, 'run') } },
  { path: ['bench', 'report'], table: BENCH_REPORT_OPTIONS, register: registerBenchCommands, base: {}, extra: ['no/such/result-folder'] },
  { path: ['bench', 'stub'], table: BENCH_STUB_OPTIONS, register: registerBenchCommands, base: { host: '127.0.0.1', port: '0' } },
  { path: ['bench', 'validate'], table: BENCH_VALIDATE_OPTIONS, register: registerBenchCommands, base: { out: join(scratch, 'validate') } },
  { path: ['bench', 'max-rate'], table: BENCH_MAX_RATE_OPTIONS, register: registerBenchCommands, base: { rates: '1', 'duration-s': '1', repeats: '1', out: join(scratch, 'max-rate.json') } },
  // A dry run prints the plan and exits 0: a bad value it took shows as exit 0.
  { path: ['ladder'], table: LADDER_OPTIONS, register: registerLadderCommand, base: { out: join(scratch, 'ladder'), runner: 'mock', rates: '1' }, extra: ['--dry-run'] },
];

/** The registered commander command at `path`. */
function commandAt(c: CommandCase): Command {
  const program = new Command('headroom');
  c.register(program);
  let cmd = program;
  for (const name of c.path) cmd = cmd.commands.find((x) => x.name() === name)!;
  return cmd;
}

interface Case {
  readonly name: string;
  readonly args: readonly string[];
  readonly env: Readonly<Record<string, string>>;
  /** What the one line must contain: the flag, or the variable it came from. */
  readonly names: readonly string[];
}

/** The bad values to try for `spec`: what its parser rejects, a later check's, 'bogus' for a choice, a non-boolean env value for a flag. */
function badValues(spec: OptionSpec): string[] | 'any' {
  if (spec.kind === 'choice') return ['bogus'];
  const later = LATER_CHECKS[spec.name];
  const rejected = CANDIDATES.find((v) => {
    try {
      spec.parse!(v);
      return false;
    } catch {
      return true;
    }
  });
  const bad = [...(rejected === undefined ? [] : [rejected]), ...(later === undefined ? [] : [later])];
  return bad.length > 0 ? bad : 'any';
}

function casesOf(c: CommandCase): { cases: Case[]; unexplained: string[] } {
  const cmd = commandAt(c);
  const cases: Case[] = [];
  const unexplained: string[] = [];
  for (const spec of c.table) {
    const baseArgs = (without: string): string[] => [
      ...c.path,
      ...Object.entries(c.base).filter(([k]) => k !== without).flatMap(([k, v]) => [`--${k}`, v]),
      ...(c.extra ?? []).filter((a) => a !== `--${without}`),
    ];
    if (spec.kind === 'flag') {
      // A flag has no value to get wrong on the command line; its variable does.
      const env = envName(cmd, cmd.options.find((o) => o.name() === spec.name)!);
      cases.push({ name: `${env}=maybe`, args: baseArgs(spec.name), env: { [env]: 'maybe' }, names: [env, `--${spec.name}`] });
      continue;
    }
    const bad = badValues(spec);
    if (bad === 'any') {
      if (ANY_VALUE[spec.name] === undefined) unexplained.push(spec.name);
      continue;
    }
    for (const v of bad) cases.push({ name: `--${spec.name}=${v}`, args: [...baseArgs(spec.name), `--${spec.name}=${v}`], env: {}, names: [`--${spec.name}`] });
  }
  return { cases, unexplained };
}

async function inPool<T>(items: readonly T[], width: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(Array.from({ length: width }, async () => {
    while (next < items.length) await fn(items[next++]!);
  }));
}

for (const c of COMMANDS) {
  const label = c.path.join(' ');

  test(`${label}: the table is every option the command has, and each default passes its own parser`, () => {
    assert.deepEqual(commandAt(c).options.map((o) => o.flags), c.table.map((s) => s.flags));
    for (const s of c.table) if (s.parse !== null && s.defaultText !== null) assert.doesNotThrow(() => s.parse!(s.defaultText!), s.flags);
  });

  test(`${label}: every option rejects a bad value before doing anything, in one line naming the flag`, async () => {
    const { cases, unexplained } = casesOf(c);
    assert.deepEqual(unexplained, [], 'options whose parser takes every candidate, with no later check or reason here');
    const failures: string[] = [];
    rmSync(scratch, { recursive: true, force: true });
    await inPool(cases, 4, async (k) => {
      const r = await runCli(k.args, k.env, 30_000);
      const out = r.stdout + r.stderr;
      const lines = r.stderr.trimEnd().split('\n');
      const why =
        r.code !== 1 ? `exit ${String(r.code)}` : /listening|serving/.test(out) ? 'listened first' : lines.length !== 1 ? `${lines.length} lines` : !k.names.some((n) => r.stderr.includes(n)) ? 'does not name the flag' : null;
      if (why !== null) failures.push(`${k.name}: ${why}: ${r.stderr.trim().slice(0, 300)}`);
    });
    assert.deepEqual(failures, []);
    assert.equal(existsSync(scratch), false, `${label} wrote ${scratch}: a case ran past its flags`);
    console.log(`# ${label}: ${cases.length} bad values refused`);
  });
}
