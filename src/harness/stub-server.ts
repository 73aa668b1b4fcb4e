// A model-free, sleep-based OpenAI-compatible stub for validating the harness itself.
//
// Service model: `slots` servers (0 = unlimited), FIFO wait for a free one; a request holding a
// slot sleeps `ttftMs`, then streams min(max_tokens, maxOutputTokens) one-word chunks `tokenMs`
// apart, then a usage chunk and [DONE]. So the stub's capacity is exactly
//     slots * 1000 / (ttftMs + (tokens - 1) * tokenMs)   requests per second,
// and below it a request's latency is its service time plus ~0 queueing. With `queueLimit`, a
// request that would wait behind that many others is refused at once with 503 + Retry-After.
// It does no CPU work per token, so it measures the generator, not itself.
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface StubOptions {
  readonly port: number;
  readonly host: string;
  /** Concurrent requests in service; 0 = unlimited. */
  readonly slots: number;
  readonly ttftMs: number;
  readonly tokenMs: number;
  /** Caps the streamed tokens regardless of max_tokens. */
  readonly maxOutputTokens: number;
  /** Waiting requests beyond this are shed with 503; -1 = never shed. */
  readonly queueLimit: number;
  readonly retryAfterS: number;
}

export const DEFAULT_STUB: StubOptions = {
  port: 0,
  host: '127.0.0.1',
  slots: 0,
  ttftMs: 10,
  tokenMs: 0,
  maxOutputTokens: 4,
  queueLimit: -1,
  retryAfterS: 1,
};

export interface StubHandle {
  readonly url: string;
  readonly server: http.Server;
  close(): Promise<void>;
}

/** The stub's capacity in requests/s for requests that stream `tokens` tokens. */
export function stubCapacityRps(o: StubOptions, tokens: number): number {
  if (o.slots === 0) return Infinity;
  const serviceMs = o.ttftMs + Math.max(0, Math.min(tokens, o.maxOutputTokens) - 1) * o.tokenMs;
  return (o.slots * 1000) / serviceMs;
}

export async function startStubServer(partial: Partial<StubOptions> = {}): Promise<StubHandle> {
  const o: StubOptions = { ...DEFAULT_STUB, ...partial };
  let numActive = 0;
  let numServed = 0;
  let numShed = 0;
  const waiting: Array<() => void> = [];
  const sleep = (ms: number): Promise<void> =>
    ms <= 0 ? Promise.resolve() : new Promise((r) => setTimeout(r, ms));

  const acquire = (): Promise<void> | 'shed' => {
    if (o.slots === 0 || numActive < o.slots) {
      numActive++;
      return Promise.resolve();
    }
    if (o.queueLimit >= 0 && waiting.length >= o.queueLimit) return 'shed';
    return new Promise((resolve) => waiting.push(resolve));
  };
  const release = (): void => {
    const next = waiting.shift();
    if (next !== undefined) next(); // the slot passes straight to the next waiter
    else numActive--;
  };

  const server = http.createServer((req, res) => {
    if (req.method === 'GET' && req.url === '/stats') {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ stub: true, options: o, numActive, numWaiting: waiting.length, numServed, numShed }));
      return;
    }
    if (req.method === 'GET' && req.url === '/v1/models') {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ object: 'list', data: [{ id: 'stub', object: 'model' }] }));
      return;
    }
    if (req.method !== 'POST') {
      res.statusCode = 404;
      res.end();
      return;
    }
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => {
      void serve(Buffer.concat(parts).toString('utf8'), req, res);
    });
  });

  const serve = async (raw: string, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> => {
    let maxTokens = 16;
    let promptWords = 0;
    try {
      const j = JSON.parse(raw) as { max_tokens?: number; messages?: Array<{ content?: string }> };
      if (typeof j.max_tokens === 'number') maxTokens = j.max_tokens;
      for (const m of j.messages ?? []) promptWords += (m.content ?? '').split(' ').length;
    } catch {
      res.statusCode = 400;
      res.end(JSON.stringify({ error: { message: 'bad json', type: 'invalid_request_error', code: 'bad_json' } }));
      return;
    }
    const got = acquire();
    if (got === 'shed') {
      numShed++;
      res.writeHead(503, { 'content-type': 'application/json', 'retry-after': String(o.retryAfterS) });
      res.end(JSON.stringify({ error: { message: 'stub queue full', type: 'overloaded', code: 'queue_full' } }));
      return;
    }
    await got;
    // A client that gave up (timeout, abort) while this request waited or slept frees its slot at once.
    const gone = (): boolean => req.socket.destroyed;
    try {
      if (gone()) return;
      const tokens = Math.max(1, Math.min(maxTokens, o.maxOutputTokens));
      await sleep(o.ttftMs);
      if (gone()) return;
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      for (let i = 0; i < tokens; i++) {
        if (i > 0) await sleep(o.tokenMs);
        if (gone()) return;
        const finish = i === tokens - 1 ? '"length"' : 'null';
        res.write(`data: {"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":" w"},"finish_reason":${finish}}]}\n\n`);
      }
      res.write(
        `data: {"object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":${promptWords},"completion_tokens":${tokens},"total_tokens":${promptWords + tokens}}}\n\n`,
      );
      res.end('data: [DONE]\n\n');
      numServed++;
    } finally {
      release();
    }
  };

  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(o.port, o.host, resolve));
  const addr = server.address() as AddressInfo;
  return {
    url: `http://${o.host}:${addr.port}`,
    server,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
