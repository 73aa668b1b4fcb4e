// The `headroom` command line: serve, gateway, model, calibrate, bench, admission, gate, replay, ladder, report, demo. Each group registers itself from its own file.
//
// Start-up stays light (`--help` and `--version` load no server, DuckDB or OpenTelemetry code): a
// command's heavy modules are imported inside its action. Every error ends as one line on stderr
// and exit status 1 (user-error.ts); --debug (or HEADROOM_DEBUG=1) adds the stack trace. Options
// can also come from the environment and a --config file (config.ts).
import { readFileSync } from 'node:fs';
import { Command } from 'commander';
import { registerServeCommand } from './commands/serve.ts';
import { registerGatewayCommand } from './commands/gateway.ts';
import { registerModelCommands } from './commands/model.ts';
import { registerCalibrateCommand } from './commands/calibrate.ts';
import { registerBenchCommands } from './commands/bench.ts';
import { registerAdmissionCommands } from './commands/admission.ts';
import { registerGateCommand } from './commands/gate.ts';
import { registerReplayCommand } from './commands/replay.ts';
import { registerLadderCommand } from './commands/ladder.ts';
import { registerReportCommand } from './commands/report.ts';
import { registerDemoCommand } from './commands/demo.ts';
import { applyConfig, prepareConfig, suggestion } from './config.ts';
import { enableDebug, reportError, UserError } from './user-error.ts';

const CONFIG_HELP = `
Every option of every command can also be set in the environment (serve: HEADROOM_<FLAG>, e.g.
HEADROOM_SLO_MS=5000; other commands: HEADROOM_<COMMAND>_<FLAG>, e.g. HEADROOM_BENCH_RUN_URL) or in
a YAML/JSON file given with --config (keys as flags or camelCase). Precedence: flag > env > file > default.
--debug (or HEADROOM_DEBUG=1) prints the stack trace of an error.`;

// A reader that went away (stdout or stderr on a closed pipe: EPIPE) is no reason to stop serving:
// the lines written there are lost, nothing else. Any other write error stays fatal.
for (const out of [process.stdout, process.stderr]) {
  out.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code !== 'EPIPE') throw err;
  });
}

const argv = process.argv.slice(2);
const debug = argv.includes('--debug') || process.env['HEADROOM_DEBUG'] === '1';
const args = argv.filter((a) => a !== '--debug');
if (debug) enableDebug();

const program = buildProgram();
try {
  rejectUnknownCommand(program, args);
  await program.parseAsync(args, { from: 'user' });
} catch (err) {
  reportError(err, debug);
}

function buildProgram(): Command {
  const program = new Command('headroom').description('An SLO-aware LLM inference gateway').version(`headroom ${packageVersion()}`, '-V, --version', 'print the version').addHelpText('after', CONFIG_HELP);
  registerServeCommand(program);
  registerGatewayCommand(program);
  registerModelCommands(program);
  registerCalibrateCommand(program);
  registerBenchCommands(program);
  registerAdmissionCommands(program);
  registerGateCommand(program);
  registerReplayCommand(program);
  registerLadderCommand(program);
  registerReportCommand(program);
  registerDemoCommand(program);
  prepareConfig(program);
  forEachCommand(program, (cmd) => {
    const path = commandPath(cmd);
    cmd.showHelpAfterError(false).configureOutput({ outputError: (str, write) => write(`headroom: ${str.trimEnd().replace(/\s*\n\s*/g, ' ')} (see headroom ${path}--help)\n`) });
  });
  program.hook('preAction', async (_program, action) => {
    await applyConfig(action);
  });
  return program;
}

/**
 * serve is the default command, so commander would read `headroom srve` as serve with a stray
 * argument; a first word that is no command is refused here, with the nearest command name.
 */
function rejectUnknownCommand(program: Command, args: readonly string[]): void {
  const first = args[0];
  if (first === undefined || first.startsWith('-') || first === 'help') return;
  const names = program.commands.flatMap((c) => [c.name(), ...c.aliases()]);
  if (names.includes(first)) return;
  throw new UserError(`unknown command '${first}'${suggestion(first, names)}; commands: ${program.commands.map((c) => c.name()).join(', ')}`);
}

function forEachCommand(cmd: Command, f: (cmd: Command) => void): void {
  f(cmd);
  for (const c of cmd.commands) forEachCommand(c, f);
}

/** `bench run ` for the bench run command, '' for the program. */
function commandPath(cmd: Command): string {
  const names: string[] = [];
  for (let c: Command | null = cmd; c?.parent != null; c = c.parent) names.unshift(c.name());
  return names.map((n) => `${n} `).join('');
}

function packageVersion(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
  return pkg.version;
}
