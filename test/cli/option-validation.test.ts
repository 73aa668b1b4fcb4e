// Every option of `headroom serve` and `headroom gateway` that takes a value rejects a bad one
// before the port is bound, with one line on stderr that names the flag, and exit status 1. The table is checked against the
// command's own option list, so a new option must say here what a bad value for it is (or why any
// value is acceptable). Each case is a real process (bin/headroom.mjs), four at a time.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Command } from 'commander';
import { registerGatewayCommand } from '../../src/cli/commands/gateway.ts';
import { registerServeCommand } from '../../src/cli/commands/serve.ts';
import { runCli } from './run-cli.ts';

/** A bad value per option; a string starting with 'any:' says why every value is accepted. */
const SERVE_BAD: Readonly<Record<string, string>> = {
  host: 'any: a name is resolved when the port is bound',
  port: 'abc',
  'probe-port': '70000',
  'slo-ms': 'abc',
  'min-slo-ms': '-5',
  'max-slo-ms': 'abc',
  'max-output-tokens': '0',
  'body-limit-bytes': 'abc',
  'drain-timeout-ms': 'abc',
  'headers-timeout-ms': 'abc',
  'request-timeout-ms': 'abc',
  'keep-alive-timeout-ms': 'abc',
  'max-connections': 'abc',
  'max-connections-per-address': 'abc',
  'otel-endpoint': 'not a url',
  'log-level': 'bogus',
  'log-format': 'bogus',
  'api-key-file': 'no-such-file.txt',
  'cors-origin': 'not an origin',
  runner: 'bogus',
  model: 'no-such-model.gguf',
  threads: 'abc',
  'inline-step-ms': 'abc',
  ctx: 'abc',
  'chat-template': 'no-such-template',
  'prompt-special': 'bogus',
  parallel: 'abc',
  'batch-tokens': 'abc',
  scheduler: 'bogus',
  kv: 'bogus',
  'prefix-cache': 'bogus',
  'block-size': 'abc',
  'cache-max-fraction': 'abc',
  'pin-threads': 'bogus',
  'split-steps': 'bogus',
  'overlap-dispatch': 'bogus',
  'cache-host-tokens': 'abc',
  'cache-retain': 'bogus',
  'kv-watermark': 'abc',
  'max-preemptions': 'abc',
  'prefill-chunk': 'abc',
  'step-target-ms': 'abc',
  'step-min-chunk': 'abc',
  priority: 'bogus',
  'static-batch': 'abc',
  'static-wait-ms': 'abc',
  'max-queued': 'abc',
  'mock-speed': 'abc',
  record: '/proc/self/headroom-record',
  'record-max-bytes': 'abc',
  'record-max-files': 'abc',
  'dashboard-runs': 'no-such-runs-dir',
  'served-model-name': 'any: a model name is any text',
  admission: 'bogus',
  'admission-guarantee': '1.5',
  'admission-calibration': 'bogus',
  'admission-artifact': 'no-such-artifact.json',
  'admission-calibration-traces': 'no-such-traces-dir',
  'admission-state': '/proc/self/headroom-state',
  'admission-self-train': 'bogus',
  'admission-headroom': 'bogus',
  'admission-headroom-batch-share': 'abc',
  'admission-headroom-queue': 'bogus',
  'admission-keep-warm-ms': 'abc',
  'trace-out': '/proc/self/headroom-trace.jsonl',
  'max-inflight-requests': 'abc',
  'max-inflight-tokens': 'abc',
  'max-inflight-total-tokens': 'abc',
  'flow-queue-size': 'abc',
  'flow-queue-ttl-ms': 'abc',
  'priority-bands': 'abc',
  'flow-redis-url': 'not a url',
  'flow-replicas': 'abc',
  'flow-redis-lease-ms': 'abc',
  'flow-redis-timeout-ms': 'abc',
  'flow-redis-poll-ms': 'abc',
};

function valueOptions(register: (p: Command) => void): string[] {
  const program = new Command();
  register(program);
  return program.commands[0]!.options.filter((o) => o.required || o.optional).map((o) => o.long!.slice(2));
}

async function inPool<T>(items: readonly T[], width: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(Array.from({ length: width }, async () => {
    while (next < items.length) await fn(items[next++]!);
  }));
}

/** The options gateway shares with serve take the same bad values; these are its own. */
const SHARED = ['host', 'port', 'probe-port', 'slo-ms', 'min-slo-ms', 'max-slo-ms', 'max-output-tokens', 'body-limit-bytes', 'drain-timeout-ms', 'headers-timeout-ms', 'request-timeout-ms', 'keep-alive-timeout-ms', 'max-connections', 'max-connections-per-address', 'otel-endpoint', 'log-level', 'log-format', 'api-key-file', 'cors-origin', 'admission', 'admission-guarantee', 'admission-calibration', 'admission-artifact', 'admission-calibration-traces', 'admission-headroom', 'admission-headroom-batch-share', 'admission-headroom-queue', 'admission-keep-warm-ms', 'trace-out', 'max-inflight-requests', 'max-inflight-tokens', 'max-inflight-total-tokens', 'flow-queue-size', 'flow-queue-ttl-ms', 'priority-bands', 'flow-redis-url', 'flow-replicas', 'flow-redis-lease-ms', 'flow-redis-timeout-ms', 'flow-redis-poll-ms'];
const GATEWAY_BAD: Readonly<Record<string, string>> = {
  ...Object.fromEntries(SHARED.map((k) => [k, SERVE_BAD[k]!])),
  upstream: 'ftp://upstream.example',
  'health-interval-ms': 'abc',
  'probe-timeout-ms': 'abc',
  'eject-after': 'abc',
  'scrape-metrics': 'bogus',
  'scrape-interval-ms': 'abc',
  'metrics-stale-ms': 'abc',
  'max-attempts': 'abc',
  'connect-timeout-ms': 'abc',
  'upstream-timeout-ms': 'abc',
  'upstream-first-byte-timeout-ms': 'abc',
  'upstream-idle-timeout-ms': 'abc',
  'upstream-max-event-bytes': 'abc',
  'metrics-max-bytes': 'abc',
  'prefix-weight': 'abc',
  'queue-weight': 'abc',
  'kv-weight': 'abc',
  'saturation-queue': 'abc',
  'saturation-kv': '2',
  'upstream-slots': 'abc',
  'upstream-max-inflight': 'abc',
  'affinity-unit-bytes': 'abc',
  'upstream-api-key': 'any: a key is any text',
  'upstream-api-keys-file': 'no-such-keys.txt',
  'upstream-ca': 'no-such-ca.pem',
  'upstream-cert': 'no-such-cert.pem',
  'upstream-key': 'no-such-key.pem',
  'upstream-tls-verify': 'bogus',
  'affinity-capacity-bytes': 'abc',
};

const COMMANDS = [
  { name: 'serve', register: registerServeCommand, table: SERVE_BAD, base: { runner: 'mock', host: '127.0.0.1', port: '0' } },
  { name: 'gateway', register: registerGatewayCommand, table: GATEWAY_BAD, base: { upstream: 'http://127.0.0.1:9', host: '127.0.0.1', port: '0' } },
] as const;

for (const c of COMMANDS) {
  test(`${c.name}: the table names every option that takes a value`, () => {
    assert.deepEqual(valueOptions(c.register).sort(), Object.keys(c.table).sort());
  });

  test(`${c.name}: every option rejects a bad value before listening, in one line naming the flag`, async () => {
    const failures: string[] = [];
    const cases = Object.entries(c.table).filter(([, bad]) => !bad.startsWith('any:'));
    await inPool(cases, 4, async ([flag, bad]) => {
      const args = [c.name, ...Object.entries({ ...c.base, [flag]: bad }).flatMap(([k, v]) => [`--${k}`, v])];
      const r = await runCli(args, {}, 30_000);
      const lines = r.stderr.trimEnd().split('\n');
      const why =
        r.code !== 1 ? `exit ${String(r.code)}` : /listening/.test(r.stdout + r.stderr) ? 'listened first' : lines.length !== 1 ? `${lines.length} lines` : !r.stderr.includes(`--${flag}`) && !r.stderr.includes(`'${flag}'`) ? 'does not name the flag' : null;
      if (why !== null) failures.push(`--${flag} ${bad}: ${why}: ${r.stderr.trim().slice(0, 300)}`);
    });
    assert.deepEqual(failures, []);
  });
}
