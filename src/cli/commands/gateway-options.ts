// The option table of `headroom gateway`: its own (upstreams, probes and scrapes, the picker,
// failover and the bounds on what an untrusted upstream may send, upstream credentials and TLS),
// then the serving options it shares with `serve` (front-door-options.ts, admission-options.ts).
// Each value is checked alone by its parser; gateway.ts checks what involves two options
// (--affinity-capacity-bytes ≥ --affinity-unit-bytes) or reads a file's contents (keys, PEM).
import { normalizeUpstreamUrl } from '../../proxy/upstream.ts';
import { DEFAULT_FIRST_BYTE_TIMEOUT_MS, DEFAULT_IDLE_TIMEOUT_MS, DEFAULT_MAX_EVENT_BYTES, DEFAULT_MAX_METRICS_BYTES } from '../../proxy/upstream-limits.ts';
import { anyText, existingFile, intAtLeast0, intAtLeast1, numberAtLeast0, numberIn, reporting } from '../option-parsers.ts';
import type { OptionValues } from '../option-table.ts';
import { choice, list, opt } from '../option-table.ts';
import { admissionOptions } from './admission-options.ts';
import { FLOW_OPTIONS, SERVER_OPTIONS } from './front-door-options.ts';

/** An upstream URL as given (the pool normalizes it again), once it is one. */
const upstreamUrl = reporting((text) => {
  normalizeUpstreamUrl(text);
  return text;
});

const GATEWAY_OWN_OPTIONS = [
  list('--upstream <url>', 'an upstream server (http://host:port, with or without /v1); repeatable, at least one', upstreamUrl, { repeatable: true }),
  opt('--health-interval-ms <ms>', 'probe every upstream (GET /health) this often', intAtLeast1, { default: '1000' }),
  opt('--probe-timeout-ms <ms>', 'a probe or metrics scrape taking longer fails', intAtLeast1, { default: '2000' }),
  opt('--eject-after <n>', 'failed probes in a row that eject an upstream (a request that cannot reach it ejects it at once), and upstream errors in a row (bad answers) that degrade it', intAtLeast1, { default: '2' }),
  choice('--scrape-metrics <on|off>', "read each upstream's /metrics (queue depth, KV use: vLLM, SGLang, llama-server and Headroom names); off: the picker sees only the gateway's own in-flight counts", ['on', 'off'], 'on'),
  opt('--scrape-interval-ms <ms>', "read each upstream's /metrics this often", intAtLeast1, { default: '500' }),
  opt('--metrics-stale-ms <ms>', 'scraped load older than this counts as saturation', intAtLeast1, { default: '5000' }),
  opt('--max-attempts <n>', 'most upstreams one request is tried on before its first byte', intAtLeast1, { default: '3' }),
  opt('--connect-timeout-ms <ms>', 'connecting to an upstream taking longer fails over', intAtLeast1, { default: '2000' }),
  opt('--upstream-timeout-ms <ms>', "longest wait for the headers of an upstream's answer that is not streamed (it is generated whole first)", intAtLeast1, { default: '300000' }),
  opt('--upstream-first-byte-timeout-ms <ms>', "longest wait for a stream's headers and first event; past it the upstream is degraded and the request fails over", intAtLeast1, { default: String(DEFAULT_FIRST_BYTE_TIMEOUT_MS) }),
  opt('--upstream-idle-timeout-ms <ms>', "longest silence inside an upstream's body once its headers are in; past it the upstream is degraded (failover before the first byte, an error event after)", intAtLeast1, { default: String(DEFAULT_IDLE_TIMEOUT_MS) }),
  opt('--upstream-max-event-bytes <n>', "largest single event of an upstream's stream; a longer one is an upstream error", intAtLeast1, { default: String(DEFAULT_MAX_EVENT_BYTES) }),
  opt('--metrics-max-bytes <n>', 'largest /metrics body read from an upstream; a longer one fails the scrape', intAtLeast1, { default: String(DEFAULT_MAX_METRICS_BYTES) }),
  opt('--prefix-weight <w>', 'picker: weight of prefix affinity (share of the prompt the upstream probably has cached)', numberAtLeast0, { default: '2' }),
  opt('--queue-weight <w>', "picker: weight of a short queue (scraped queue plus the gateway's in-flight requests)", numberAtLeast0, { default: '1' }),
  opt('--kv-weight <w>', 'picker: weight of free KV cache', numberAtLeast0, { default: '1' }),
  opt('--saturation-queue <n>', 'picker: an upstream with this many queued requests (scraped) is saturated: no affinity sends it more', intAtLeast1, { default: '5' }),
  opt('--saturation-kv <f>', 'picker: an upstream with this share of its KV cache in use is saturated, (0, 1]', numberIn('(0, 1]'), { default: '0.9' }),
  opt('--upstream-slots <n>', "sequence slots of each upstream, for admission control's view of free slots (0: what each reports — llama-server's /props total_slots — or unknown)", intAtLeast0, { default: '0' }),
  opt('--upstream-max-inflight <n>', "picker: an upstream holding this many of the gateway's requests is saturated (0: no such bound)", intAtLeast0, { default: '0' }),
  opt('--affinity-unit-bytes <n>', 'prefix affinity: prompts are matched in units of this many bytes', intAtLeast1, { default: '16' }),
  opt('--upstream-api-key <key>', 'sent to every upstream as Authorization: Bearer (prefer the environment variable HEADROOM_GATEWAY_UPSTREAM_API_KEY: a flag shows in the process list)', anyText),
  opt('--upstream-api-keys-file <file>', "one 'URL KEY' per line: that upstream's own key, sent instead of --upstream-api-key (each URL one of --upstream)", existingFile),
  opt('--upstream-ca <file>', "PEM CA certificates to trust for https upstreams, besides the system's", existingFile),
  opt('--upstream-cert <file>', 'PEM client certificate for upstreams that ask for one (mutual TLS); with --upstream-key', existingFile),
  opt('--upstream-key <file>', 'PEM private key of --upstream-cert', existingFile),
  choice('--upstream-tls-verify <on|off>', "verify https upstreams' certificates (off: accept any; a warning at start)", ['on', 'off'], 'on'),
  opt('--affinity-capacity-bytes <n>', 'prefix affinity: most prompt bytes remembered per upstream (least recently used go first)', intAtLeast1, { default: String(16 << 20) }),
];

export const GATEWAY_OPTIONS = [...GATEWAY_OWN_OPTIONS, ...SERVER_OPTIONS, ...admissionOptions('off'), ...FLOW_OPTIONS];

export type GatewayOptions = OptionValues<typeof GATEWAY_OPTIONS>;
