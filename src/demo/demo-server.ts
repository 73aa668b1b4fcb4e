// The demo's HTTP side: the page at `/` and its JSON at `/demo/data`. Each engine's own live
// window (GET /dashboard/data on the engine) is passed through as raw text, never parsed here, so
// a poll costs the demo's event loop — which also times the load generator — two small copies.
//
//   GET /            the side-by-side page (page.ts)
//   GET /demo/data   DemoData: the run, and per side the client's tally and the engine's window
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { request } from 'undici';

/** Where the page's numbers come from; the demo (demo.ts) implements it. */
export interface DemoSource {
  /** The run's facts and each side's client tally, as JSON-ready data; `sides[i].engine` is filled in here. */
  header(): DemoHeader;
  /** Each side's engine, in the header's order. */
  readonly engines: readonly { readonly url: string }[];
  /** Engine windows frozen at the end of the load (raw JSON and its offset), or null while live. */
  frozen(): readonly FrozenEngine[] | null;
}

export interface FrozenEngine {
  readonly json: string | null;
  readonly offsetS: number;
  readonly error: string | null;
}

export interface DemoHeader {
  readonly phase: 'running' | 'finishing' | 'done' | 'stopping';
  /** Seconds since the load started. */
  readonly elapsedS: number;
  readonly sides: readonly Record<string, unknown>[];
  readonly [fact: string]: unknown;
}

export interface DemoServer {
  readonly url: string;
  close(): Promise<void>;
}

/** Fetches an engine's /dashboard/data as text, with the load second its window starts at. */
export async function engineWindow(url: string, elapsedS: number): Promise<FrozenEngine> {
  try {
    const res = await request(new URL('/dashboard/data', url), { headersTimeout: 2000, bodyTimeout: 2000 });
    const text = await res.body.text();
    if (res.statusCode !== 200) return { json: null, offsetS: 0, error: `HTTP ${res.statusCode}` };
    // The window's last bucket is the engine's current second, which ends within a second from
    // now; where in it the engine's clock is, the window does not say, so it is placed half-way
    // (points land within half a second of their arrival).
    const numBuckets = (/"tS":\[([^\]]*)\]/.exec(text)?.[1] ?? '').split(',').length;
    return { json: text, offsetS: Math.round((elapsedS - numBuckets + 0.5) * 10) / 10, error: null };
  } catch (err) {
    return { json: null, offsetS: 0, error: (err as Error).message };
  }
}

export async function startDemoServer(src: DemoSource, page: string, host: string, port: number): Promise<DemoServer> {
  const server = http.createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET') {
      res.writeHead(405, { allow: 'GET' }).end();
      return;
    }
    if (path === '/') {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' }).end(page);
      return;
    }
    if (path === '/demo/data') {
      void data(src).then((body) => res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-store' }).end(body));
      return;
    }
    res.writeHead(404, { 'content-type': 'text/plain' }).end('not found: the demo serves / and /demo/data\n');
  });
  server.keepAliveTimeout = 5000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const addr = server.address() as AddressInfo;
  const shown = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
  return {
    url: `http://${shown === '0.0.0.0' ? '127.0.0.1' : shown}:${addr.port}/`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** The JSON: the header with each side's engine window spliced in as raw text. */
async function data(src: DemoSource): Promise<string> {
  const h = src.header();
  const windows = src.frozen() ?? (await Promise.all(src.engines.map((e) => engineWindow(e.url, h.elapsedS))));
  const sides = h.sides.map((s, i) => {
    const w = windows[i];
    const head = JSON.stringify({ ...s, engineOffsetS: w?.offsetS ?? 0, engineError: w === undefined ? 'no engine' : w.error });
    return `${head.slice(0, -1)},"engine":${w?.json ?? 'null'}}`;
  });
  const head = JSON.stringify({ ...h, sides: [] });
  return head.replace('"sides":[]', () => `"sides":[${sides.join(',')}]`);
}
