// The study's processes: N `headroom serve` replicas and one `headroom gateway` in front of them,
// each its own Node process (so the load generator's event loop is its own), on ports the OS picks
// (port 0; the URL is read from the ready log line), so a study never collides with another server
// on the machine. Replicas stay up for the whole study; the gateway is started fresh for every
// point with that point's cap, so no flow-control state (drain rate, queue) carries over.
//
// Invariants: every process started here is stopped by `stop()` (SIGTERM, then SIGKILL after a
// grace period), also when a point fails, and killAll() reaches them from a signal handler; a
// process that exits before its ready line rejects its start with the last lines it printed.
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import { forEachSample } from '../../proxy/scrape.ts';
import { fetchJson } from '../run.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const BIN = path.join(ROOT, 'bin/headroom.mjs');
const TAIL_CHARS = 4000;
const KILL_AFTER_MS = 15_000;

/** Every process started here and not yet stopped, so an interrupted study can stop them all. */
const LIVE = new Set<ChildProcess>();

/** SIGTERM to every live process started here (for a signal handler: the study's `finally` will not run). */
export function killAll(): void {
  for (const child of LIVE) child.kill('SIGTERM');
}

export interface Proc {
  readonly url: string;
  /** The arguments after `headroom`, exactly as passed (for run-evidence.csv). */
  readonly args: readonly string[];
  /** The last lines the process printed (diagnostics only). */
  tail(): string;
  stop(): Promise<number | null>;
}

/** Starts `headroom <args>` and resolves once its ready line names its URL. */
export async function startHeadroom(args: readonly string[], readyRe: RegExp, timeoutMs = 120_000): Promise<Proc> {
  const child: ChildProcess = spawn(process.execPath, [BIN, ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  LIVE.add(child);
  const exited = new Promise<number | null>((resolve) =>
    child.once('exit', (code) => {
      LIVE.delete(child);
      resolve(code);
    }),
  );
  const url = await new Promise<string>((resolve, reject) => {
    let found = false;
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`headroom ${args[0] ?? ''} not ready within ${timeoutMs} ms: ${out.slice(-400)}`));
    }, timeoutMs);
    const onData = (b: Buffer): void => {
      out = (out + b.toString()).slice(-TAIL_CHARS);
      if (found) return;
      const m = readyRe.exec(out);
      if (m?.[1] !== undefined) {
        found = true;
        clearTimeout(timer);
        resolve(m[1]);
      }
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    void exited.then((code) => {
      clearTimeout(timer);
      if (!found) reject(new Error(`headroom ${args[0] ?? ''} exited with code ${String(code)} before it was ready: ${out.slice(-400)}`));
    });
  });
  return {
    url,
    args,
    tail: () => out,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        const killer = setTimeout(() => child.kill('SIGKILL'), KILL_AFTER_MS);
        const code = await exited;
        clearTimeout(killer);
        return code;
      }
      return child.exitCode;
    },
  };
}

export const SERVE_READY = /serving .* on (http:\/\/[\d.:]+); ready/;
export const GATEWAY_READY = /gateway for .* on (http:\/\/[\d.:]+); ready/;

/**
 * GET a JSON document; null when the server does not answer 200 within `attempts` tries (a
 * keep-alive socket the server closed just as it was reused fails once; the next try succeeds).
 */
export async function getJson(url: string, route: string, timeoutMs = 5000, attempts = 3): Promise<unknown> {
  for (let i = 0; i < attempts; i++) {
    const got = await getJsonOnce(url, route, timeoutMs);
    if (got !== null) return got;
    if (i + 1 < attempts) await new Promise((r) => setTimeout(r, 100));
  }
  return null;
}

function getJsonOnce(url: string, route: string, timeoutMs: number): Promise<unknown> {
  return fetchJson(url, route, {}, timeoutMs);
}

/** GET a text document (a Prometheus scrape); null when the server does not answer 200 within `attempts` tries. */
export async function getText(url: string, route: string, timeoutMs = 5000, attempts = 3): Promise<string | null> {
  for (let i = 0; i < attempts; i++) {
    const got = await getTextOnce(url, route, timeoutMs);
    if (got !== null) return got;
    if (i + 1 < attempts) await new Promise((r) => setTimeout(r, 100));
  }
  return null;
}

async function getTextOnce(url: string, route: string, timeoutMs: number): Promise<string | null> {
  try {
    const res = await request(new URL(route, url), { headersTimeout: timeoutMs, bodyTimeout: timeoutMs });
    if (res.statusCode !== 200) {
      await res.body.dump();
      return null;
    }
    return await res.body.text();
  } catch {
    return null;
  }
}

/**
 * Sums of the named series in a Prometheus text scrape (every label set of a name added up); a
 * name with no sample is absent from the map. Reads sample lines only; never throws on odd text.
 */
export function sumSeries(text: string, names: readonly string[]): Map<string, number> {
  const out = new Map<string, number>();
  forEachSample(text, new Set(names), (name, value) => out.set(name, (out.get(name) ?? 0) + value));
  return out;
}

/** What a replica's /stats says about its prefix cache: off by configuration, and no cache object. */
export function prefixCacheOffInStats(stats: unknown): boolean {
  const s = stats as { config?: { options?: Record<string, { value?: unknown }> }; engine?: { scheduler?: { kv?: { prefixCache?: unknown } } } } | null;
  return s?.config?.options?.['prefix-cache']?.value === 'off' && s.engine?.scheduler?.kv?.prefixCache === null;
}
