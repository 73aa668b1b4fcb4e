// The option tables both serving commands (`serve`, `gateway`) share: listening, budgets, HTTP
// timeouts and connection bounds, metrics and tracing, logs, API keys, CORS (SERVER_OPTIONS), and
// flow control, local or shared through Redis (FLOW_OPTIONS). Each value is checked alone by its
// parser; what involves two options (--min-slo-ms ≤ --slo-ms, --flow-redis-timeout-ms <
// --flow-redis-lease-ms) is checked by front-door.ts, which reads them.
import { LOG_FORMATS, LOG_LEVELS } from '../../api/config.ts';
import { parseBandShares } from '../../flow/priority.ts';
import { checkRedisUrl } from '../../flow/shared-store.ts';
import { anyText, existingFile, httpUrl, int, intAtLeast0, intAtLeast1, port, reporting } from '../option-parsers.ts';
import type { OptionValues } from '../option-table.ts';
import { choice, flag, list, opt } from '../option-table.ts';

export const SERVER_OPTIONS = [
  opt('--host <host>', 'interface to listen on', anyText, { default: '0.0.0.0' }),
  opt('--port <port>', 'port to listen on', port, { default: '8000' }),
  opt('--probe-port <port>', 'also serve /health, /ready and /metrics (only those) on this port, so probes and scrapes never queue behind a crowd of API clients (0: any free port; default: none)', port),
  opt('--slo-ms <ms>', 'default latency budget per request', intAtLeast1, { default: '10000' }),
  opt('--min-slo-ms <ms>', 'smallest x-slo-ms a client may ask for (below: 400 at once, never queued)', intAtLeast1, { default: '100' }),
  opt('--max-slo-ms <ms>', 'largest x-slo-ms a client may ask for (above: 400)', intAtLeast1, { default: '3600000' }),
  opt('--max-output-tokens <n>', 'largest max_tokens accepted', intAtLeast1, { default: '1024' }),
  opt('--body-limit-bytes <n>', 'largest request body (413 above)', intAtLeast1, { default: String(1 << 20) }),
  opt('--drain-timeout-ms <ms>', 'drain deadline after SIGTERM/SIGINT: then running streams get an error event and [DONE], and the process exits', intAtLeast1, { default: '60000' }),
  opt('--headers-timeout-ms <ms>', 'longest time to receive request headers (408 and close)', intAtLeast1, { default: '10000' }),
  opt('--request-timeout-ms <ms>', 'longest time to receive a whole request, body included (408 and close)', intAtLeast1, { default: '30000' }),
  opt('--keep-alive-timeout-ms <ms>', 'idle keep-alive connections close after this', intAtLeast1, { default: '5000' }),
  opt('--max-connections <n>', 'most open connections (past it only /health and /ready answer); kept below the open-file limit', intAtLeast1, { default: '1024' }),
  opt('--max-connections-per-address <n>', 'most open connections from one client address', intAtLeast1, { default: '256' }),
  // An exporter given anything but an http(s) URL never connects, silently.
  opt('--otel-endpoint <url>', 'export OpenTelemetry request spans to this OTLP/HTTP collector (off by default)', httpUrl('an http(s) URL of an OTLP/HTTP collector')),
  flag('--no-metrics', 'do not serve Prometheus metrics on /metrics'),
  choice('--log-level <level>', 'least severe log line written (request lines are info)', LOG_LEVELS, 'info'),
  choice('--log-format <format>', 'log lines as JSON objects or as text', LOG_FORMATS, 'json'),
  flag('--log-prompts', 'put prompt and output text in request log lines (never otherwise)'),
  opt('--api-key-file <file>', "API keys, one 'key tenant [role]' per line (role user|operator); also HEADROOM_API_KEYS. /health, /ready, /metrics stay open", existingFile),
  flag('--protect-metrics', 'with API keys, /metrics needs a key too (default: open, like /health and /ready)'),
  // Origins are checked by serverConfig() (api/config.ts), the one place that knows their form.
  list('--cors-origin <origin>', 'allow browsers on this origin (scheme://host[:port], or *) to call the API; repeatable', anyText, { repeatable: true }),
];

export type ServerOptions = OptionValues<typeof SERVER_OPTIONS>;

/** A Redis URL as given, once it is one the store can use. */
const redisUrl = reporting((text) => {
  const bad = checkRedisUrl(text);
  if (bad !== null) throw bad;
  return text;
});

export const FLOW_OPTIONS = [
  opt('--max-inflight-requests <n>', 'flow control: most requests in flight (0: unlimited); past it requests wait in the flow queue or get 429', intAtLeast0, { default: '0' }),
  opt('--max-inflight-tokens <n>', 'flow control: most prompt tokens of the requests in flight (0: unlimited)', intAtLeast0, { default: '0' }),
  opt('--max-inflight-total-tokens <n>', 'flow control: most prompt plus max_tokens × n of the requests in flight (0: unlimited)', intAtLeast0, { default: '0' }),
  opt('--flow-queue-size <n>', 'flow control: most requests waiting for a slot, all bands together (0: 429 at once)', intAtLeast0, { default: '256' }),
  opt('--flow-queue-ttl-ms <ms>', 'flow control: longest wait for a slot, then 429 with Retry-After', intAtLeast1, { default: '5000' }),
  // parseBandShares names the flag itself; the table's caller does too.
  opt('--priority-bands <shares>', "flow control: each priority band's share of the caps and the queue, lowest band first (x-headroom-priority 0..n-1; no header: the top band)", reporting(parseBandShares, /^--priority-bands: /), { default: '1' }),
  opt('--flow-redis-url <url>', 'flow control shared by several replicas: the caps hold across every process given this Redis (redis://host:port[/db]); unreachable: each serves a local share', redisUrl),
  opt('--flow-replicas <n>', 'shared flow control: while Redis is unreachable each replica serves ⌊cap / n⌋ of each cap (0: the replicas last seen live in Redis)', intAtLeast0, { default: '0' }),
  opt('--flow-redis-lease-ms <ms>', 'shared flow control: a replica silent this long (crashed) is dropped and its slots come back', int('at least 30 ms', (n) => n >= 30), { default: '5000' }),
  opt('--flow-redis-timeout-ms <ms>', 'shared flow control: a Redis call slower than this fails, and the replica serves its local share', intAtLeast1, { default: '200' }),
  opt('--flow-redis-poll-ms <ms>', 'shared flow control: requests waiting for capacity another replica may free are retried this often', intAtLeast1, { default: '10' }),
];

export type FlowOptions = OptionValues<typeof FLOW_OPTIONS>;
