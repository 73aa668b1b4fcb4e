// The soak benchmark (not CI): `headroom serve` on the tiny llama model with its defaults (one
// llama.cpp thread, so the event loop keeps a core on a 2-core machine) under ~80% of its capacity
// for --duration-s (30 minutes by default), a share of streams cut by the client mid-way. Every
// --sample-s it records the server's resident memory (/proc/<pid>/status), JS heap and event-loop
// lag (prom-client's default metrics on /metrics: nodejs_eventloop_lag_p99_seconds and _max_, each
// over the interval since the previous scrape, as prom-client resets its histogram on collect),
// in-flight counts and free KV blocks (/stats). Every --quiet-every-s the load pauses until the
// engine is idle and the free KV blocks are read: the KV baseline, which must not fall.
//
// Capacity is --capacity req/s, or calibrated first (a closed loop at the 16 sequence slots for
// --calibration-s). Writes samples.csv, summary.json and summary.md (trend.ts says how it judges).
//
//   node --import tsx bench/soak/soak.ts [--duration-s 1800] [--load 0.8] [--capacity R]
//     [--abort-share 0.2] [--sample-s 5] [--quiet-every-s 300] [--calibration-s 30]
//     [--server-args='--threads 1'] [--seed 1] --out results/soak/<name>
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { getJson, get, procStatusMiB } from '../burst/probes.ts';
import { startServer } from '../burst/servers.ts';
import { calibrate, OpenLoop } from './load.ts';
import type { RequestShape } from './load.ts';
import { CSV_COLUMNS, toCsv, trend, windowFor } from './trend.ts';
import type { Sample } from './trend.ts';

const { values } = parseArgs({
  options: {
    'duration-s': { type: 'string', default: '1800' },
    load: { type: 'string', default: '0.8' },
    capacity: { type: 'string' },
    'abort-share': { type: 'string', default: '0.2' },
    'sample-s': { type: 'string', default: '5' },
    'quiet-every-s': { type: 'string', default: '300' },
    'calibration-s': { type: 'string', default: '30' },
    'server-args': { type: 'string', default: '--threads 1' },
    seed: { type: 'string', default: '1' },
    label: { type: 'string', default: 'soak' },
    out: { type: 'string' },
  },
});
if (values.out === undefined) throw new Error('--out: expected a directory for samples.csv and the summary');
const durationS = Number(values['duration-s']);
const sampleS = Number(values['sample-s']);
const quietEveryS = Number(values['quiet-every-s']);
const seed = Number(values.seed);
const serverArgs = values['server-args'].split(' ').filter((a) => a !== '');
/** Short prompts, outputs long enough that a cut lands mid-stream. */
const SHAPE_BASE = { promptWords: [16, 96], maxTokens: [32, 96] } as const;

const server = await startServer('engine', 'serve', serverArgs, { readyTimeoutMs: 120_000 });
const stop = async (): Promise<void> => server.stop(30_000);
process.on('SIGINT', () => void stop().then(() => process.exit(130)));
try {
  const models = (await getJson(server.url, '/v1/models')) as { data: { id: string }[] } | null;
  const shape: RequestShape = { model: models?.data[0]?.id ?? 'tiny', ...SHAPE_BASE };
  const capacity = values.capacity !== undefined ? Number(values.capacity) : await calibrate(server.url, shape, 16, Number(values['calibration-s']), seed);
  // After the calibration: the prefix cache then already holds the chat template's shared prefix.
  const kvAtStart = await idleKv();
  const ratePerS = capacity * Number(values.load);
  process.stdout.write(`soak: capacity ${capacity.toFixed(2)} req/s, sending ${ratePerS.toFixed(2)} req/s for ${durationS} s, ${(100 * Number(values['abort-share'])).toFixed(0)}% cut mid-stream\n`);

  let quiet = false;
  const loop = new OpenLoop({ url: server.url, shape, ratePerS, abortShare: Number(values['abort-share']), seed, paused: () => quiet });
  const samples: Sample[] = [];
  const t0 = performance.now();
  const nowS = (): number => (performance.now() - t0) / 1000;
  let nextQuietS = quietEveryS;
  while (nowS() < durationS) {
    await sleep(Math.max(0, (samples.length + 1) * sampleS - nowS()) * 1000);
    let idleFreeKvBlocks: number | null = null;
    if (nowS() >= nextQuietS && nowS() < durationS - sampleS) {
      quiet = true;
      idleFreeKvBlocks = await idleKv();
      quiet = false;
      nextQuietS += quietEveryS;
    }
    samples.push(await sample(nowS(), loop, idleFreeKvBlocks));
    if (server.exit() !== null) throw new Error(`the server exited: ${JSON.stringify(server.exit())}; output: ${server.tail()}`);
  }
  await loop.stop();
  const kvAtEnd = await idleKv();
  samples.push(await sample(nowS(), loop, kvAtEnd));
  writeResults(samples, { capacity, ratePerS, kvAtStart, kvAtEnd, counts: loop.counts, shape });
} finally {
  await stop();
}

async function sample(tS: number, loop: OpenLoop, idleFreeKvBlocks: number | null): Promise<Sample> {
  const [metrics, stats] = await Promise.all([get(server.url, '/metrics', 10_000), getJson(server.url, '/stats', 10_000)]);
  const gauge = (name: string): number | null => {
    const m = new RegExp(`^${name} ([0-9.e+-]+)$`, 'm').exec(metrics?.body ?? '');
    return m === null ? null : Number(m[1]);
  };
  const ms = (v: number | null): number | null => (v === null ? null : v * 1000);
  const sched = (stats as { engine?: { scheduler: { numRunning: number; numWaiting: number; numFreeBlocks: number; kv: { prefixCache: { numNodes: number } } } } } | null)?.engine?.scheduler;
  const flow = (stats as { flow?: { inFlight: { requests: number } } } | null)?.flow;
  const c = loop.counts;
  return {
    tS,
    rssMiB: procStatusMiB(server.pid, 'VmRSS') ?? 0,
    heapUsedMiB: (gauge('nodejs_heap_size_used_bytes') ?? NaN) / 2 ** 20,
    lagP99Ms: ms(gauge('nodejs_eventloop_lag_p99_seconds')),
    lagMaxMs: ms(gauge('nodejs_eventloop_lag_max_seconds')),
    running: sched?.numRunning ?? null,
    waiting: sched?.numWaiting ?? null,
    freeKvBlocks: sched?.numFreeBlocks ?? null,
    cachedNodes: sched?.kv.prefixCache.numNodes ?? null,
    flowInFlight: flow?.inFlight.requests ?? null,
    clientInFlight: c.inFlight,
    sent: c.sent,
    completed: c.completed,
    aborted: c.aborted,
    refused: c.refused,
    errors: c.errors,
    idleFreeKvBlocks,
  };
}

/** Waits (up to 60 s) for nothing running or waiting, then returns the free KV blocks; null if never idle. */
async function idleKv(): Promise<number | null> {
  for (let i = 0; i < 600; i++) {
    const s = (await getJson(server.url, '/stats')) as { engine: { scheduler: { numRunning: number; numWaiting: number; numFreeBlocks: number } } } | null;
    const sched = s?.engine.scheduler;
    if (sched !== undefined && sched.numRunning === 0 && sched.numWaiting === 0) return sched.numFreeBlocks;
    await sleep(100);
  }
  return null;
}

function writeResults(samples: readonly Sample[], run: { capacity: number; ratePerS: number; kvAtStart: number | null; kvAtEnd: number | null; counts: object; shape: RequestShape }): void {
  const out = values.out!;
  mkdirSync(out, { recursive: true });
  writeFileSync(path.join(out, 'samples.csv'), toCsv(samples));
  const endS = samples.at(-1)?.tS ?? 0;
  const windowS = windowFor(endS);
  // The first minute (or window) is warm-up: code paths JIT-compiled, caches filling.
  const fromS = Math.min(60, windowS);
  const trends = Object.fromEntries((['rssMiB', 'heapUsedMiB', 'lagP99Ms', 'lagMaxMs', 'running', 'freeKvBlocks'] as const).map((f) => [f, trend(samples, f, fromS, windowS)]));
  const kvBaselines = samples.filter((s) => s.idleFreeKvBlocks !== null).map((s) => ({ tS: Math.round(s.tS), freeKvBlocks: s.idleFreeKvBlocks }));
  const summary = { label: values.label, durationS: endS, windowS, warmupS: fromS, load: Number(values.load), abortShare: Number(values['abort-share']), serverArgs, seed, ...run, kvBaselines: [{ tS: 0, freeKvBlocks: run.kvAtStart }, ...kvBaselines], trends, columns: CSV_COLUMNS };
  writeFileSync(path.join(out, 'summary.json'), `${JSON.stringify(summary, null, 2)}\n`);
  const f = (v: number | null, d = 1): string => (v === null ? 'n/a' : v.toFixed(d));
  const lines = [
    `# ${values.label}: ${f(endS / 60)} min at ${f(run.ratePerS, 2)} req/s (${Number(values.load) * 100}% of ${f(run.capacity, 2)} req/s), ${Number(values['abort-share']) * 100}% cut mid-stream`,
    '',
    `server: headroom serve ${serverArgs.join(' ')}; requests: ${JSON.stringify(run.counts)}`,
    '',
    `| series | slope per 10 min | mean, first ${f(windowS / 60)} min | mean, last ${f(windowS / 60)} min | max |`,
    '|---|---|---|---|---|',
    ...Object.entries(trends).map(([k, t]) => `| ${k} | ${f(t.slopePer10Min, 2)} | ${f(t.firstWindowMean, 2)} | ${f(t.lastWindowMean, 2)} | ${f(t.max, 2)} |`),
    '',
    `KV baseline (free blocks with nothing running): ${[{ tS: 0, freeKvBlocks: run.kvAtStart }, ...kvBaselines].map((b) => `${b.freeKvBlocks} at ${b.tS} s`).join(', ')}`,
    `(slopes and windows from ${f(fromS, 0)} s on: the first ${f(fromS, 0)} s are warm-up)`,
  ];
  writeFileSync(path.join(out, 'summary.md'), `${lines.join('\n')}\n`);
  process.stdout.write(`${lines.join('\n')}\n`);
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
