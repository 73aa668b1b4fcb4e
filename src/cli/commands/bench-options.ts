// The option tables of `headroom bench run|report|stub|validate|max-rate`. Values are checked by
// commander as it reads them ('on-parse'): a bad one is its one-line usage error naming the flag.
// What involves two options (--eos-token-id with --vocab-size; warm-up and cool-down inside the
// duration) is checked by bench.ts before any request is sent.
import { InvalidArgumentError } from 'commander';
import path from 'node:path';
import { DEFAULT_STUB } from '../../harness/stub-server.ts';
import { WORKLOAD_KINDS } from '../../harness/workloads.ts';
import type { Parser } from '../option-parsers.ts';
import { anyInt, anyText, httpUrl, int, intAtLeast0, intAtLeast1, listOf, num, numberAtLeast0, port, positiveNumber } from '../option-parsers.ts';
import { choice, flag, list, opt, optionalValue } from '../option-table.ts';

/** `--header 'name: value'`: the name (lower case) and the value. */
const header: Parser<[string, string]> = (v) => {
  const i = v.indexOf(':');
  const name = i < 0 ? '' : v.slice(0, i).trim();
  if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name)) throw new InvalidArgumentError(`expected 'name: value', got '${v}'`);
  return [name.toLowerCase(), v.slice(i + 1).trim()];
};

/** `--mix s:m:l`: three weights. */
const mix: Parser<[number, number, number]> = (v) => {
  const w = listOf(numberAtLeast0, /[,:]/)(v);
  if (w.length !== 3) throw new InvalidArgumentError(`expected three weights s:m:l, got '${v}'`);
  return [w[0]!, w[1]!, w[2]!];
};

const urlPath: Parser<string> = (v) => {
  if (!v.startsWith('/')) throw new InvalidArgumentError(`expected a path starting with '/', got '${v}'`);
  return v;
};

export const BENCH_RUN_OPTIONS = [
  opt('--url <url>', 'base URL of an OpenAI-compatible server', httpUrl(), { required: true }),
  opt('--path <path>', 'chat-completions path', urlPath, { default: '/v1/chat/completions' }),
  opt('--model <name>', 'model name to send (default: first of GET /v1/models)', anyText),
  choice('--loop <kind>', 'open: scheduled arrivals; closed: N workers (calibration)', ['open', 'closed'], 'open'),
  choice('--arrival <kind>', 'open-loop arrival process', ['poisson', 'gamma', 'fixed'], 'poisson'),
  opt('--rate <rps>', 'open loop: mean arrivals per second', positiveNumber, { default: '1' }),
  opt('--gamma-shape <k>', 'gamma arrivals: shape (1 = Poisson, < 1 burstier)', positiveNumber, { default: '1' }),
  opt('--concurrency <n>', 'closed loop: workers', intAtLeast1, { default: '1' }),
  opt('--duration-s <s>', 'arrivals are generated over this many seconds', positiveNumber, { default: '60' }),
  opt('--warmup-s <s>', 'arrivals before this are flagged warmup', numberAtLeast0, { default: '0' }),
  opt('--cooldown-s <s>', 'arrivals in the last s seconds are flagged cooldown', numberAtLeast0, { default: '0' }),
  opt('--timeout-s <s>', 'client timeout; timed-out rows are censored', positiveNumber, { default: '300' }),
  opt('--seed <n>', 'seed for arrivals and workload', anyInt, { default: '0' }),
  choice('--workload <kind>', 'request mix (*-natural: lengths end at EOS, docs/bench.md)', WORKLOAD_KINDS, 'chat'),
  opt('--eos-token-id <id>', 'natural-length workloads: the EOS token to bias (default: probed from the target)', intAtLeast0),
  opt('--vocab-size <n>', 'natural-length workloads: vocabulary size (default: probed from the target)', int('an integer ≥ 2', (n) => n >= 2)),
  opt('--natural-mean-tokens <n>', "natural-length workloads: mean output length (default: the workload's)", num('a number > 1', (n) => n > 1)),
  opt('--tokens-per-word <r>', 'measured tokens per generated word on the target tokenizer', positiveNumber, { default: '1' }),
  opt('--context-tokens <n>', 'model context; mixed-size inputs are scaled to fit (0 = none)', intAtLeast0, { default: '0' }),
  opt('--mix <s:m:l>', 'mixed workload weights short:medium:long', mix, { default: '1:1:1' }),
  opt('--prompt-tokens <n>', 'uniform workload: prompt tokens', intAtLeast1, { default: '256' }),
  opt('--output-tokens <n>', 'uniform and mixed workloads: max_tokens', intAtLeast1, { default: '128' }),
  opt('--slo-header-ms <ms>', 'send x-slo-ms with every request', positiveNumber),
  flag('--no-ignore-eos', 'do not send ignore_eos: true'),
  opt('--max-slip-p99-ms <ms>', 'mark the run invalid above this scheduling slip p99', positiveNumber, { default: '5' }),
  opt('--out <dir>', 'result folder (default results/runs/<time>-<workload>-<loop>)', anyText),
  opt('--slo <ms>', 'E2E SLO for the summary printed after the run', positiveNumber, { default: '4000' }),
  optionalValue('--report [file]', 'also write one HTML page with figures at --slo (default <out>/report.html)', anyText),
  flag('--json', 'print the summary as JSON'),
  flag('--no-progress', 'no progress bar'),
  opt('--api-key <key>', 'send Authorization: Bearer <key> with every request', anyText),
  list('--header <name:value>', 'send this header with every request (repeatable)', header, { repeatable: true, oneItemFromConfig: true }),
];

export const BENCH_REPORT_OPTIONS = [
  opt('--slo <ms>', 'E2E SLO in ms', positiveNumber, { default: '4000' }),
  opt('--slo-grid <list>', 'SLOs for the sensitivity table (default 0.5x..2x of --slo)', listOf(positiveNumber, /[,:]/)),
  flag('--json', 'JSON summary (vLLM bench-serve key names)'),
];

export const BENCH_STUB_OPTIONS = [
  opt('--port <n>', 'port (0 = any)', port, { default: '8199' }),
  opt('--host <h>', 'host', anyText, { default: DEFAULT_STUB.host }),
  opt('--slots <n>', 'concurrent requests in service (0 = unlimited)', intAtLeast0, { default: String(DEFAULT_STUB.slots) }),
  opt('--ttft-ms <ms>', 'sleep before the first token', numberAtLeast0, { default: String(DEFAULT_STUB.ttftMs) }),
  opt('--token-ms <ms>', 'sleep between tokens', numberAtLeast0, { default: String(DEFAULT_STUB.tokenMs) }),
  opt('--max-output-tokens <n>', 'cap on streamed tokens', intAtLeast1, { default: String(DEFAULT_STUB.maxOutputTokens) }),
  opt('--queue-limit <n>', 'shed with 503 beyond this many waiting (-1 = never)', int('an integer ≥ -1', (n) => n >= -1), { default: String(DEFAULT_STUB.queueLimit) }),
  opt('--retry-after-s <s>', 'Retry-After on 503', numberAtLeast0, { default: String(DEFAULT_STUB.retryAfterS) }),
];

export const BENCH_VALIDATE_OPTIONS = [
  opt('--out <dir>', 'where to write the validation results (the committed record is results/validation)', anyText, { default: path.join('results', 'runs', 'validation') }),
  flag('--quick', 'short runs (minutes -> seconds) for a smoke check'),
];

export const BENCH_MAX_RATE_OPTIONS = [
  opt('--rates <list>', 'rates to try, rps', listOf(positiveNumber, /[,:]/), { default: '200,500,1000,2000,3000,4000' }),
  opt('--duration-s <s>', 'seconds per run', positiveNumber, { default: '10' }),
  opt('--repeats <n>', 'interleaved repeats', intAtLeast1, { default: '3' }),
  opt('--slip-bound-ms <ms>', 'sustained means median slip p99 below this', positiveNumber, { default: '5' }),
  opt('--stub-ttft-ms <ms>', 'stub service time', numberAtLeast0, { default: '5' }),
  opt('--out <file>', 'write the result JSON here', anyText),
];
