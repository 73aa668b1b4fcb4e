// Starts an in-process gateway on an ephemeral port in front of the given upstreams, with short
// probe intervals; resolves once the first probe round is done.
import { serverConfig } from '../../src/api/config.ts';
import type { ServerConfig } from '../../src/api/config.ts';
import { Gateway } from '../../src/gateway.ts';
import type { GatewayOptions } from '../../src/gateway.ts';
import type { PickerOptions } from '../../src/proxy/picker.ts';
import type { PoolOptions } from '../../src/proxy/pool.ts';
import type { FlowControl } from '../../src/flow/flow-control.ts';

export interface TestGateway {
  readonly url: string;
  readonly gateway: Gateway;
  close(): Promise<void>;
}

export interface TestGatewayOptions {
  readonly server?: Partial<ServerConfig>;
  readonly pool?: Partial<Omit<PoolOptions, 'clock' | 'access'>>;
  readonly access?: GatewayOptions['access'];
  readonly clock?: GatewayOptions['clock'];
  readonly picker?: Partial<PickerOptions>;
  readonly maxAttempts?: number;
  /** Forwarding options besides maxAttempts (the upstream timeouts and bounds). */
  readonly proxy?: Partial<GatewayOptions['proxy']>;
  readonly flow?: FlowControl;
  readonly admission?: GatewayOptions['admission'];
  readonly traceOut?: string;
  readonly keys?: GatewayOptions['keys'];
}

export const TEST_PICKER: PickerOptions = { prefixWeight: 2, queueWeight: 1, kvWeight: 1, saturationQueue: 4, saturationKv: 0.9, maxInFlight: Infinity, staleMs: 60_000 };

export async function startTestGateway(upstreams: readonly string[], opts: TestGatewayOptions = {}): Promise<TestGateway> {
  const options: GatewayOptions = {
    upstreams,
    server: serverConfig({ host: '127.0.0.1', port: 0, logLevel: 'silent', ...opts.server }),
    // Long intervals: tests drive probes and scrapes with checkNow()/scrapeNow(), not the timers.
    pool: { healthIntervalMs: 60_000, scrapeIntervalMs: 60_000, probeTimeoutMs: 2000, ejectAfterFailures: 1, scrapeMetrics: true, affinityUnit: 16, affinityCapacity: 1 << 20, ...opts.pool },
    picker: { ...TEST_PICKER, ...opts.picker },
    proxy: { maxAttempts: opts.maxAttempts ?? 3, connectTimeoutMs: 2000, upstreamTimeoutMs: 30_000, ...opts.proxy },
    ...(opts.flow === undefined ? {} : { flow: opts.flow }),
    ...(opts.admission === undefined ? {} : { admission: opts.admission }),
    ...(opts.traceOut === undefined ? {} : { traceOut: opts.traceOut }),
    ...(opts.access === undefined ? {} : { access: opts.access }),
    ...(opts.clock === undefined ? {} : { clock: opts.clock }),
    ...(opts.keys === undefined ? {} : { keys: opts.keys }),
  };
  const gateway = new Gateway(options);
  const url = await gateway.start();
  return { url, gateway, close: () => gateway.close() };
}

/** `p`, or a failure naming what never happened (a generous bound: a broken test fails instead of hanging). */
export async function within<T>(p: Promise<T>, what: string, ms = 10_000): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), ms)));
  try {
    return await Promise.race([p, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
