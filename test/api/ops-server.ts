// An in-process Headroom for the operations tests (logs, keys, CORS, aliases, request ids): the
// mock runner, its log lines kept in memory, and optional keys, flow control and admission.
import { KeyRing } from '../../src/api/auth.ts';
import { serverConfig } from '../../src/api/config.ts';
import type { ServerConfig } from '../../src/api/config.ts';
import { Headroom } from '../../src/app.ts';
import type { HeadroomOptions } from '../../src/app.ts';
import type { MockRunnerOptions } from '../../src/engine/runner/mock/mock-runner.ts';
import { MockRunner } from '../../src/engine/runner/mock/mock-runner.ts';
import type { Runner } from '../../src/engine/runner/runner.ts';
import type { FlowControl } from '../../src/flow/flow-control.ts';

export interface OpsServer {
  readonly url: string;
  readonly headroom: Headroom;
  /** Every log line so far, parsed (JSON format) or raw (text format). */
  readonly raw: string[];
  lines(): Record<string, unknown>[];
  /** The request lines (msg "request"). */
  requests(): Record<string, unknown>[];
  close(): Promise<void>;
}

export interface OpsServerOptions {
  readonly server?: Partial<ServerConfig>;
  /** `key tenant [role]` entries. */
  readonly keys?: readonly string[];
  readonly flow?: FlowControl;
  readonly admission?: HeadroomOptions['admission'];
  readonly mock?: MockRunnerOptions;
  /** A runner of the test's own (default: a MockRunner with `mock`). */
  readonly runner?: Runner;
  readonly obs?: HeadroomOptions['obs'];
  /** Admission-trace rows to this JSONL file. */
  readonly traceOut?: string;
}

export async function startOpsServer(opts: OpsServerOptions = {}): Promise<OpsServer> {
  const raw: string[] = [];
  const keys = opts.keys === undefined ? null : KeyRing.parse(opts.keys.map((text, i) => ({ text, where: `entry ${i + 1}` })));
  const headroom = new Headroom({
    runner: opts.runner ?? new MockRunner({ cost: { speed: 0 }, ...opts.mock }),
    server: serverConfig({ host: '127.0.0.1', port: 0, ...opts.server }),
    scheduler: { scheduler: 'continuous' },
    maxQueuedRequests: 64,
    keys,
    logDestination: { write: (line) => void raw.push(line) },
    ...(opts.flow === undefined ? {} : { flow: opts.flow }),
    ...(opts.admission === undefined ? {} : { admission: opts.admission }),
    ...(opts.obs === undefined ? {} : { obs: opts.obs }),
    ...(opts.traceOut === undefined ? {} : { traceOut: opts.traceOut }),
  });
  const url = await headroom.start();
  const lines = (): Record<string, unknown>[] => raw.map((l) => JSON.parse(l) as Record<string, unknown>);
  return { url, headroom, raw, lines, requests: () => lines().filter((l) => l.msg === 'request'), close: () => headroom.close() };
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Polls until `cond` holds (fails after `timeoutMs`). */
export async function until(cond: () => boolean, what: string, timeoutMs = 5000): Promise<void> {
  const t0 = Date.now();
  while (!cond()) {
    if (Date.now() - t0 > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await sleep(5);
  }
}
