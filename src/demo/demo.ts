// `headroom demo`: two engines on the same model — admission off and admission on — driven by one
// open-loop overload, shown side by side on one live page.
//
// Fairness is the point of the comparison, so everything but the admission flag is shared: one
// schedule (Poisson arrivals and chat requests drawn once from the seed, harness/run.ts
// drawSchedule) is sent to both engines by two open loops started in the same tick (the harness's
// generator: arrivals are never delayed by a slow server, latency is measured from intended
// arrival); both engines get the same runner, threads, model and SLO. The generator, the page
// server and the tallies share the demo's event loop; the engines run in their own processes
// (engine-process.ts).
//
// Order: model → both engines ready → capacity probe (unless --rate) → page up → load → (done: engine windows frozen, summary
// printed) → stop(): load aborted, engines SIGTERMed (SIGKILL after a grace), page closed.
import { setMaxListeners } from 'node:events';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Progress } from '../harness/generator.ts';
import { runOpenLoop } from '../harness/generator.ts';
import type { BenchConfig } from '../harness/run.ts';
import { drawSchedule, resolveModel } from '../harness/run.ts';
import type { EngineProcess } from './engine-process.ts';
import { startEngine } from './engine-process.ts';
import type { DemoHeader, DemoServer, DemoSource, FrozenEngine } from './demo-server.ts';
import { engineWindow, startDemoServer } from './demo-server.ts';
import { OVERLOAD, PROBE_CLIENTS, PROBE_S, probeCapacity, WARMUP_S } from './capacity.ts';
import { demoPage } from './page.ts';
import type { TallyData } from './tally.ts';
import { SideTally } from './tally.ts';

export interface DemoConfig {
  readonly runner: 'llama' | 'mock';
  /** GGUF file; null: the generated tiny model (llama), or none (mock). */
  readonly model: string | null;
  /** llama.cpp threads per engine. */
  readonly threads: number;
  readonly mockSpeed: number;
  /** Both engines' E2E budget, and the goodput threshold, ms. */
  readonly sloMs: number;
  /** Poisson arrivals per second, sent to each engine; null: OVERLOAD times the capacity probe's (capacity.ts). */
  readonly rate: number | null;
  /** Seconds of arrivals. */
  readonly durationS: number;
  readonly seed: number;
  /** The client gives up on a request after this long. */
  readonly timeoutS: number;
  readonly host: string;
  readonly port: number;
  readonly readyTimeoutS: number;
}

/** Tokens per generated word on the tiny model's tokenizer (bench/ladder/lib.sh, measured in docs/benchmarks.md). */
export const TOKENS_PER_WORD = 1.15;
/** After the last answer, the engines' windows are read (and kept) this much later. */
const FREEZE_DELAY_MS = 1000;

interface Side {
  readonly name: string;
  readonly admission: 'off' | 'conformal';
  readonly engine: EngineProcess;
  readonly tally: SideTally;
  readonly progress: Progress;
}

export interface RunningDemo {
  readonly url: string;
  /** The rate the load runs at (--rate, or from the probe). */
  readonly rate: number;
  /** What the capacity probe measured, req/s (null: --rate was given). */
  readonly capacityRps: number | null;
  readonly engines: readonly EngineProcess[];
  /** Resolves when every request of both loops has been answered (or the demo was stopped). */
  readonly loadDone: Promise<void>;
  /** One line per side: what it did. */
  summary(): string[];
  /** Stops the load, the engines and the page; idempotent. */
  stop(): Promise<void>;
}

/** The paragraph the terminal prints and the page shows. */
export function story(c: DemoConfig & { readonly rate: number }): string {
  const slo = `${c.sloMs / 1000} s`;
  return (
    `Two Headroom engines serve the same model (${c.runner} runner${c.runner === 'llama' ? `, ${c.threads} thread${c.threads === 1 ? '' : 's'} each` : ''}) ` +
    `and receive the same open-loop overload: ${c.rate} chat requests per second, Poisson arrivals from seed ${c.seed}, ` +
    `the same requests at the same instants, more than one engine can serve. The left engine admits everything (--admission off): ` +
    `its queue grows without bound, every request waits behind the backlog, latency climbs past the ${slo} SLO and goodput ` +
    `(requests answered inside the SLO) falls toward zero; clients give up after ${c.timeoutS} s. The right engine runs admission ` +
    `control (--admission conformal, Headroom's default): it refuses at once, with 503 and a Retry-After, each request it ` +
    `predicts it cannot finish in time, and keeps the ones it admits inside the SLO, so its goodput stays near what the engine can serve.`
  );
}

export async function startDemo(c: DemoConfig, log: (line: string) => void): Promise<RunningDemo> {
  if (c.runner === 'llama' && c.model === null) {
    // Generated once here, so the two engines do not both generate it.
    const { ensureDefaultModel } = await import('../model/default-model.ts');
    await ensureDefaultModel();
  }
  const common = [
    '--runner', c.runner, '--threads', String(c.threads), '--slo-ms', String(c.sloMs),
    ...(c.model === null ? [] : ['--model', c.model]),
    ...(c.runner === 'mock' ? ['--mock-speed', String(c.mockSpeed)] : []),
  ];
  const specs = [
    { name: 'admission off', admission: 'off' as const },
    { name: 'admission on (conformal)', admission: 'conformal' as const },
  ];
  log(`starting two engines (${c.runner} runner): ${specs.map((s) => s.name).join(', ')} ...`);
  // One at a time: each engine's warm-up measures the step time and rates that admission reads (its
  // floor and cold start among them); two warm-ups sharing the CPU measured them slow enough that the
  // managed engine refused every request of the demo as below its floor.
  const engines: Awaited<ReturnType<typeof startEngine>>[] = [];
  for (const s of specs) {
    try {
      engines.push(await startEngine({ name: s.name, args: [...common, '--admission', s.admission] }, c.readyTimeoutS * 1000));
    } catch (err) {
      await Promise.all(engines.map((e) => e.stop(1000)));
      throw err;
    }
  }
  let stopped = false;
  for (const e of engines) {
    log(`${e.name}: pid ${e.pid}, ${e.url}`);
    void e.exited.then((code) => {
      if (!stopped) log(`${e.name} exited with code ${String(code)} during the demo: ${e.lastLines().at(-1) ?? '(no output)'}`);
    });
  }
  const ac = new AbortController();
  // One listener per request in flight (harness/client.ts), hundreds when the unmanaged engine backs up.
  setMaxListeners(0, ac.signal);
  let server: DemoServer | null = null;
  const stopAll = async (): Promise<void> => {
    stopped = true;
    ac.abort();
    await Promise.all([...engines.map((e) => e.stop()), server?.close()]);
  };
  try {
    const url0 = engines[0]?.url ?? '';
    // The name each engine answers to (GET /v1/models); the rate is not read.
    const models = await Promise.all(engines.map((e) => resolveModel(benchConfig(c, 1, e.url))));
    let capacity: number | null = null;
    if (c.rate === null) {
      log(`measuring what the unmanaged engine serves: ${PROBE_CLIENTS} clients back to back for ${PROBE_S} s ...`);
      // Its own stream of requests (seed + 1): the demo's schedule is drawn from the seed itself.
      const probeLoad = drawSchedule({ ...benchConfig(c, 1, url0), loop: 'closed', seed: c.seed + 1 }).workload;
      capacity = await probeCapacity({ origin: new URL(url0).origin, model: models[0] ?? 'default', timeoutMs: c.timeoutS * 1000, nextSpec: () => probeLoad.next() });
      if (!(capacity > 0)) throw new Error(`the unmanaged engine answered no request in the ${PROBE_S} s capacity probe (after ${WARMUP_S} s); pass --rate`);
      log(`it answers about ${capacity.toFixed(2)} req/s; both engines get ${OVERLOAD}x that`);
    }
    const rate = c.rate ?? Math.max(0.1, Math.round(OVERLOAD * (capacity ?? 0) * 10) / 10);
    const bench = benchConfig(c, rate, url0);
    const { arrivalsMs, specs: requests } = drawSchedule(bench);
    const sides: Side[] = specs.map((s, i) => {
      const engine = engines[i];
      if (engine === undefined) throw new Error('demo: bug: an engine is missing');
      return { ...s, engine, tally: new SideTally({ sloMs: c.sloMs, durationS: c.durationS, arrivalsMs }), progress: { numSent: 0, numDone: 0, numPlanned: arrivalsMs.length } };
    });
    let t0 = performance.now();
    let phase: DemoHeader['phase'] = 'running';
    let doneAtS: number | null = null;
    let frozen: FrozenEngine[] | null = null;
    const elapsedS = (): number => doneAtS ?? (performance.now() - t0) / 1000;
    const source: DemoSource = {
      engines,
      frozen: () => frozen,
      header: () => {
        const e = elapsedS();
        if (phase === 'running' && e >= c.durationS) phase = 'finishing';
        return {
          phase,
          elapsedS: Math.round(e * 10) / 10,
          durationS: c.durationS,
          rate,
          capacityRps: capacity === null ? null : Math.round(capacity * 100) / 100,
          probeS: PROBE_S,
          seed: c.seed,
          sloMs: c.sloMs,
          timeoutS: c.timeoutS,
          workload: 'chat',
          runner: c.runner,
          model: models[0] ?? 'unknown',
          numArrivals: arrivalsMs.length,
          sides: sides.map((s) => ({ name: s.name, admission: s.admission, pid: s.engine.pid, client: tallyOf(s, e) })),
        };
      },
    };
    server = await startDemoServer(source, demoPage(story({ ...c, rate })), c.host, c.port);
    t0 = performance.now();
    const loops = sides.map((s, i) =>
      runOpenLoop({
        client: { origin: new URL(s.engine.url).origin, path: '/v1/chat/completions', model: models[i] ?? 'default', timeoutMs: c.timeoutS * 1000, sloHeaderMs: null, ignoreEos: true },
        arrivalsMs,
        specs: requests,
        durationMs: c.durationS * 1000,
        warmupMs: 0,
        cooldownMs: 0,
        progress: s.progress,
        onRecord: s.tally.add,
        signal: ac.signal,
      }),
    );
    const loadDone = Promise.all(loops).then(async () => {
      if (ac.signal.aborted) return;
      // An engine finishes a request its client gave up on a moment after the client: let it.
      await sleep(FREEZE_DELAY_MS);
      const at = elapsedS();
      frozen = await Promise.all(engines.map((e) => engineWindow(e.url, at)));
      doneAtS = at;
      phase = 'done';
    });
    const url = server.url;
    return {
      url,
      rate,
      capacityRps: capacity,
      engines,
      loadDone,
      summary: () => sides.map((s) => summaryLine(s.name, tallyOf(s, elapsedS()), c)),
      stop: async () => {
        if (phase !== 'done') phase = 'stopping';
        await stopAll();
      },
    };
  } catch (err) {
    await stopAll();
    throw err;
  }
}

function tallyOf(s: Side, elapsedS: number): TallyData {
  s.tally.setSent(s.progress.numSent);
  return s.tally.data(elapsedS);
}

function benchConfig(c: DemoConfig, rate: number, url: string): BenchConfig {
  return {
    url, path: '/v1/chat/completions', model: null, loop: 'open', arrival: 'poisson', rate, gammaShape: 1, concurrency: 1,
    durationS: c.durationS, warmupS: 0, cooldownS: 0, timeoutS: c.timeoutS, seed: c.seed, workload: 'chat',
    tokensPerWord: TOKENS_PER_WORD, contextTokens: 0, mix: [1, 1, 1], promptTokens: 256, outputTokens: 128,
    sloHeaderMs: null, ignoreEos: true, maxSlipP99Ms: 20,
  };
}

function summaryLine(name: string, d: TallyData, c: DemoConfig): string {
  const p99 = d.p99E2eMs === null ? 'none' : d.p99E2eMs === 'timeout' ? `> ${c.timeoutS} s (clients gave up)` : `${(d.p99E2eMs / 1000).toFixed(1)} s`;
  const inSlo = d.admittedInSlo === null ? '–' : `${(d.admittedInSlo * 100).toFixed(1)}%`;
  return (
    `${name}: ${d.numSent} arrivals, ${d.numRefused} refused with 503 (${d.numRetryAfter} with Retry-After), ` +
    `${d.numGood + d.numLate} completed (${d.numGood} inside the SLO), ${d.numTimedOut} given up after ${c.timeoutS} s, ` +
    `goodput ${d.goodputRps} req/s, ${inSlo} of admitted inside the SLO, p99 E2E of admitted ${p99}`
  );
}
