// Gateway mode's own series, beside the shared ones (TTFT, ITL, E2E, outcomes, refusals, flow
// control), all read from the pool and the backend at scrape time, so forwarding pays nothing:
//
//   headroom_upstream_healthy{upstream}          1 while the upstream may be picked
//   headroom_upstream_in_flight{upstream}        the gateway's requests it holds now
//   headroom_upstream_queue{upstream}            its engine queue, as last scraped (-1: unknown)
//   headroom_upstream_kv_usage_ratio{upstream}   its KV use, as last scraped (-1: unknown)
//   headroom_upstream_forwarded_total{upstream}  requests sent to it (failed attempts included)
//   headroom_upstream_failures_total{upstream}   times it was ejected
//   headroom_gateway_failovers_total             attempts that went to another upstream after one failed
//
// `upstream` is the configured base URL (a closed set, so a bounded label).

import type { Registry } from 'prom-client';
import { Counter, Gauge } from 'prom-client';
import type { ProxyBackend } from '../proxy/proxy-backend.ts';
import type { Upstream } from '../proxy/upstream.ts';

export function registerGatewayMetrics(reg: Registry, backend: ProxyBackend): void {
  const upstreams = backend.pool.upstreams;
  const perUpstream = (name: string, help: string, read: (u: Upstream) => number): void =>
    void new Gauge({
      name,
      help,
      labelNames: ['upstream'],
      registers: [reg],
      collect(this: Gauge<string>) {
        for (const u of upstreams) this.set({ upstream: u.url }, read(u));
      },
    });
  perUpstream('headroom_upstream_healthy', 'Whether the upstream may be picked (1) or is ejected or not yet probed (0).', (u) => (u.health === 'healthy' ? 1 : 0));
  perUpstream('headroom_upstream_in_flight', "The gateway's requests the upstream holds now.", (u) => u.numInFlight);
  perUpstream('headroom_upstream_queue', "The upstream's engine queue depth as last scraped (-1: unknown).", (u) => u.load?.numWaiting ?? -1);
  perUpstream('headroom_upstream_kv_usage_ratio', "The upstream's KV-cache use as last scraped, 0..1 (-1: unknown).", (u) => u.load?.kvUsage ?? -1);
  const total = (name: string, help: string, read: (u: Upstream) => number): void => {
    const last = new Map<Upstream, number>();
    void new Counter({
      name,
      help,
      labelNames: ['upstream'],
      registers: [reg],
      collect(this: Counter<string>) {
        for (const u of upstreams) {
          const v = read(u);
          this.inc({ upstream: u.url }, v - (last.get(u) ?? 0));
          last.set(u, v);
        }
      },
    });
  };
  total('headroom_upstream_forwarded_total', 'Requests sent to the upstream (attempts that failed over included).', (u) => u.numForwarded);
  total('headroom_upstream_failures_total', 'Times the upstream was ejected (failed probes, or a request that could not reach it).', (u) => u.numFailures);
  let lastFailovers = 0;
  new Counter({
    name: 'headroom_gateway_failovers_total',
    help: 'Attempts sent to another upstream after one could not answer before its first byte.',
    registers: [reg],
    collect(this: Counter) {
      const v = backend.numFailovers;
      this.inc(v - lastFailovers);
      lastFailovers = v;
    },
  });
}
