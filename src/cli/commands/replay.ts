// `headroom replay DIR`: re-run a flight recording's arrivals through the scheduler on the mock
// runner, in lockstep with the recorded steps, and diff the schedule (src/replay/replay.ts).
// Scheduler flags replace the recorded settings, to see where a change would have decided
// otherwise. Exit 0: the schedule is reproduced exactly; 1: it differs (the diffs are printed);
// 2: the recording cannot be replayed (not a recording, rotated, from an older version).
import type { Command } from 'commander';
import { InvalidArgumentError, Option } from 'commander';

interface ReplayFlags {
  scheduler?: 'fifo' | 'static' | 'continuous';
  prefillChunk?: number;
  priority?: 'prefill-first' | 'decode-first';
  maxRunning?: number;
  staticBatch?: number;
  prefixCache?: 'on' | 'off';
  json: boolean;
}

const positiveInt = (v: string): number => {
  const n = Number(v);
  if (v.trim() === '' || !Number.isInteger(n) || n < 1) throw new InvalidArgumentError(`expected a positive integer, got '${v}'`);
  return n;
};

export function registerReplayCommand(program: Command): void {
  program
    .command('replay')
    .description("re-run a recording's arrivals (serve --record) through the scheduler on the mock runner and diff the schedule (exit 0 same, 1 differs, 2 cannot replay)")
    .argument('<dir>', 'a run folder written by serve --record (it holds segment-NNNNNN.jsonl)')
    .addOption(new Option('--scheduler <name>', 'replace the recorded scheduling policy').choices(['fifo', 'static', 'continuous']))
    .option('--prefill-chunk <tokens>', 'replace the recorded prompt tokens per step', positiveInt)
    .addOption(new Option('--priority <p>', 'replace who gets the step budget first').choices(['prefill-first', 'decode-first']))
    .option('--max-running <n>', 'most requests running at once', positiveInt)
    .option('--static-batch <n>', 'static scheduler: batch size', positiveInt)
    .addOption(new Option('--prefix-cache <on|off>', 'replace the recorded prefix-cache setting').choices(['on', 'off']))
    .option('--json', 'print the report as JSON', false)
    .action(async (dir: string, f: ReplayFlags) => {
      process.exitCode = await run(dir, f);
    });
}

async function run(dir: string, f: ReplayFlags): Promise<number> {
  const { isRecording, readRecording } = await import('../../obs/recorder/reader.ts');
  const { replay } = await import('../../replay/replay.ts');
  const fail = (why: string): number => {
    process.stderr.write(`headroom: replay: ${why}\n`);
    return 2;
  };
  if (!(await isRecording(dir))) return fail(`${dir} is not a recording (no segment-NNNNNN.jsonl files); pass a run folder inside the --record directory`);
  let report;
  try {
    const rec = await readRecording(dir);
    const scheduler = {
      ...(f.scheduler === undefined ? {} : { scheduler: f.scheduler }),
      ...(f.prefillChunk === undefined ? {} : { prefillChunkTokens: f.prefillChunk }),
      ...(f.priority === undefined ? {} : { priority: f.priority }),
      ...(f.maxRunning === undefined ? {} : { maxRunning: f.maxRunning }),
      ...(f.staticBatch === undefined ? {} : { staticBatchSize: f.staticBatch }),
      ...(f.prefixCache === undefined ? {} : { prefixCache: f.prefixCache === 'on' }),
    };
    report = await replay(rec, { scheduler });
  } catch (err) {
    return fail((err as Error).message);
  }
  if (f.json) process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  else {
    const lines = [
      `replay ${report.run}: ${report.numRequests} requests, ${report.numRecordedSteps} recorded steps, ${report.numReplayedSteps} replayed`,
      report.numDiffs === 0 ? 'schedule reproduced exactly (0 diffs)' : `${report.numDiffs} steps differ${report.numDiffs > report.diffs.length ? ` (first ${report.diffs.length} shown)` : ''}:`,
      ...report.diffs.map((d) => `  step ${d.index} ${d.kind}\n    recorded: ${d.recorded}\n    replayed: ${d.replayed}`),
    ];
    process.stdout.write(`${lines.join('\n')}\n`);
  }
  return report.numDiffs === 0 ? 0 : 1;
}
