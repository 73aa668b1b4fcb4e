// A preload for the gateway's process (overhead.ts --gateway-node-args='--import=./bench/gateway/gc-preload.mjs'):
// once a second, one JSON line to $DIAG_OUT with the process's CPU time in that second, the event
// loop's delay (p50, p99, max; a timer's lateness, so it includes GC pauses and time descheduled),
// every GC pause in that second as [kind, ms] (1 scavenge, 2 minor mark-sweep, 4 mark-sweep-compact,
// 8 incremental marking, 16 weak callbacks) and the heap in use. Summarise with gc-summary.ts.
import { appendFileSync } from 'node:fs';
import { monitorEventLoopDelay, PerformanceObserver } from 'node:perf_hooks';

const out = process.env.DIAG_OUT ?? 'gc.jsonl';
const delay = monitorEventLoopDelay({ resolution: 1 });
delay.enable();
let pauses = [];
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) pauses.push([e.detail?.kind ?? 0, Number(e.duration.toFixed(3))]);
}).observe({ entryTypes: ['gc'] });
let cpu = process.cpuUsage();
setInterval(() => {
  const now = process.cpuUsage();
  const line = {
    t: Date.now(),
    cpuMs: (now.user - cpu.user + (now.system - cpu.system)) / 1000,
    eld: { p50: delay.percentile(50) / 1e6, p99: delay.percentile(99) / 1e6, max: delay.max / 1e6 },
    gc: pauses,
    heapMB: process.memoryUsage().heapUsed / 1048576,
  };
  appendFileSync(out, JSON.stringify(line) + '\n');
  cpu = now;
  pauses = [];
  delay.reset();
}, 1000).unref();
