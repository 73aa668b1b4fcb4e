// Starts an in-process Headroom on an ephemeral port for tests, with the mock runner unless told otherwise.

import { serverConfig } from '../../src/api/config.ts';
import type { ServerConfig } from '../../src/api/config.ts';
import { Headroom } from '../../src/app.ts';
import type { HeadroomOptions } from '../../src/app.ts';
import type { SchedulerConfig } from '../../src/engine/scheduler/factory.ts';
import type { MockRunnerOptions } from '../../src/engine/runner/mock/mock-runner.ts';
import { MockRunner } from '../../src/engine/runner/mock/mock-runner.ts';
import type { Runner } from '../../src/engine/runner/runner.ts';
import type { FatalListener } from '../../src/engine/engine.ts';

export interface TestServer {
  readonly url: string;
  readonly headroom: Headroom;
  readonly runner: Runner;
  close(): Promise<void>;
}

export interface TestServerOptions {
  readonly runner?: Runner;
  readonly mock?: MockRunnerOptions;
  readonly server?: Partial<ServerConfig>;
  readonly scheduler?: SchedulerConfig;
  readonly maxQueuedRequests?: number;
  readonly onEngineFailure?: FatalListener;
  readonly traceOut?: string;
  readonly admission?: HeadroomOptions['admission'];
  readonly record?: HeadroomOptions['record'];
  readonly dashboardRuns?: readonly string[];
}

export async function startTestServer(opts: TestServerOptions = {}): Promise<TestServer> {
  const runner = opts.runner ?? new MockRunner({ cost: { speed: 0 }, ...opts.mock });
  const headroom = new Headroom({
    runner,
    server: serverConfig({ host: '127.0.0.1', port: 0, logLevel: 'silent', ...opts.server }),
    scheduler: opts.scheduler ?? { scheduler: 'fifo' },
    maxQueuedRequests: opts.maxQueuedRequests ?? 1024,
    ...(opts.onEngineFailure === undefined ? {} : { onEngineFailure: opts.onEngineFailure }),
    ...(opts.traceOut === undefined ? {} : { traceOut: opts.traceOut }),
    ...(opts.admission === undefined ? {} : { admission: opts.admission }),
    ...(opts.record === undefined ? {} : { record: opts.record }),
    ...(opts.dashboardRuns === undefined ? {} : { dashboardRuns: opts.dashboardRuns }),
  });
  const url = await headroom.start();
  return { url, headroom, runner, close: () => headroom.close() };
}

/** Polls until the engine holds no request (or fails after `timeoutMs`). */
export async function waitForIdle(h: Headroom, timeoutMs = 5000): Promise<void> {
  const t0 = Date.now();
  while (h.engine.numUnfinished > 0) {
    if (Date.now() - t0 > timeoutMs) throw new Error(`engine still holds ${h.engine.numUnfinished} requests after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
