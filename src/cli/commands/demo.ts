// `headroom demo`: two engines on the generated model, admission off and on, driven by the same
// open-loop overload and shown side by side on one live page (src/demo/, docs/demo.md).
//
// The default rate is twice what the unmanaged engine answers in a 20 s probe on this machine
// (demo/capacity.ts): at twice saturation its queue grows by about one engine's worth of requests
// every second, so it is past the SLO within the first minute, while the managed engine refuses
// about half. A fixed rate would be wrong somewhere: the tiny model with one thread serves about
// 1.6 req/s here (docs/admission.md) and several times that on a fast laptop.
//
// Ctrl-C (SIGINT) or SIGTERM stops the load, then both engines (SIGTERM, SIGKILL after 5 s), then
// the page, and exits 0; a second signal exits at once (the engines are SIGKILLed on the way out).
import type { Command } from 'commander';
import { InvalidArgumentError, Option } from 'commander';
import { positive, positiveInt } from '../option-parsers.ts';
import { UserError } from '../user-error.ts';

interface DemoFlags {
  runner: 'llama' | 'mock';
  model?: string;
  threads: number;
  rate?: number;
  durationS: number;
  sloMs: number;
  timeoutS: number;
  seed: number;
  host: string;
  port: number;
  mockSpeed: number;
  readyTimeoutS: number;
  exitWhenDone: boolean;
}

const int = (v: string): number => {
  const n = Number(v);
  if (v.trim() === '' || !Number.isInteger(n)) throw new InvalidArgumentError(`expected an integer, got '${v}'`);
  return n;
};
const port = (v: string): number => {
  const n = Number(v);
  if (v.trim() === '' || !Number.isInteger(n) || n < 0 || n > 65535) throw new InvalidArgumentError(`expected a port 0..65535, got '${v}'`);
  return n;
};

export function registerDemoCommand(program: Command): void {
  program
    .command('demo')
    .description('two engines, admission off and on, under the same overload, side by side on one live page')
    .addOption(new Option('--runner <runner>', 'model runner of both engines').choices(['llama', 'mock']).default('llama'))
    .option('--model <file>', 'GGUF model both engines serve (default: the generated tiny model)')
    .option('--threads <n>', 'llama.cpp threads per engine (the two engines share the machine)', positiveInt, 1)
    .option('--rate <rps>', 'Poisson arrivals per second sent to each engine (default: twice what the unmanaged engine answers in a 20 s probe)', positive)
    .option('--duration-s <s>', 'seconds of arrivals', positive, 300)
    .option('--slo-ms <ms>', "both engines' E2E latency budget, and the goodput threshold", positiveInt, 4000)
    .option('--timeout-s <s>', 'a client gives up on a request after this long', positive, 20)
    .option('--seed <n>', 'seed of the arrivals and requests (the same for both engines)', int, 7)
    .option('--host <host>', 'address the page listens on', '127.0.0.1')
    .option('--port <n>', 'port of the page (0: any free port)', port, 8080)
    .option('--mock-speed <x>', 'mock runner cost multiplier', positive, 1)
    .option('--ready-timeout-s <s>', 'longest wait for an engine to load its model', positive, 120)
    .option('--exit-when-done', 'exit once the load is over (default: keep the page up until Ctrl-C)', false)
    .action(async (f: DemoFlags) => {
      if (f.model !== undefined && f.runner === 'mock') throw new UserError('--model: the mock runner serves no model file; drop --model or use --runner llama');
      const { existsSync } = await import('node:fs');
      if (f.model !== undefined && !existsSync(f.model)) throw new UserError(`--model: no such file: ${f.model}`);
      // A busy port is found now, not after two engines have loaded their models.
      const busy = f.port === 0 ? null : await listenProblem(f.host, f.port);
      if (busy !== null) throw new UserError(`--port: cannot listen on ${f.host}:${f.port} (${busy}); pass another --port (0: any free port)`);
      await run(f);
    });
}

/** Why the page could not listen there ('in use', or the error's code), or null. */
async function listenProblem(host: string, port: number): Promise<string | null> {
  const { createServer } = await import('node:net');
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once('error', (err: NodeJS.ErrnoException) => resolve(err.code === 'EADDRINUSE' ? 'in use' : (err.code ?? err.message)));
    probe.listen(port, host, () => probe.close(() => resolve(null)));
  });
}

async function run(f: DemoFlags): Promise<void> {
  const say = (line: string): void => {
    process.stdout.write(`${line}\n`);
  };
  let stopping: Promise<void> | null = null;
  let stop: (() => Promise<void>) | null = null;
  const onSignal = (sig: string): void => {
    if (stopping !== null) {
      say(`headroom demo: ${sig} again: exiting now`);
      process.exit(1);
    }
    say(`headroom demo: ${sig}: stopping the load and both engines ...`);
    // While starting, there is nothing to stop in order: the exit hook kills the engines.
    stopping = (stop?.() ?? Promise.resolve()).then(() => {
      say('headroom demo: stopped');
      process.exit(0);
    });
  };
  process.on('SIGINT', () => onSignal('SIGINT'));
  process.on('SIGTERM', () => onSignal('SIGTERM'));

  const { startDemo, story } = await import('../../demo/demo.ts');
  const config = {
    runner: f.runner,
    model: f.model ?? null,
    threads: f.threads,
    mockSpeed: f.mockSpeed,
    sloMs: f.sloMs,
    rate: f.rate ?? null,
    durationS: f.durationS,
    seed: f.seed,
    timeoutS: f.timeoutS,
    host: f.host,
    port: f.port,
    readyTimeoutS: f.readyTimeoutS,
  };
  let demo;
  try {
    demo = await startDemo(config, (line) => say(`headroom demo: ${line}`));
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    if (e.code === 'EADDRINUSE') throw new UserError(`--port: cannot listen on ${f.host}:${f.port} (in use); pass another --port (0: any free port)`);
    throw new UserError(e.message, { cause: err });
  }
  stop = () => demo.stop();
  say(`headroom demo: open ${demo.url}`);
  say('');
  say(story({ ...config, rate: demo.rate }));
  say('');
  say(`headroom demo: ${demo.rate} req/s for ${config.durationS} s; Ctrl-C stops everything.`);
  await demo.loadDone;
  if (stopping !== null) return;
  say('headroom demo: load finished.');
  for (const line of demo.summary()) say(`  ${line}`);
  if (f.exitWhenDone) {
    await demo.stop();
    say('headroom demo: stopped');
    process.exit(0);
  }
  say(`headroom demo: the page stays up at ${demo.url} until Ctrl-C.`);
}
