// A small OpenAI-compatible upstream for gateway tests (node:http, no model), controllable from the
// test and observable by it:
//
//   - streams `tokens` chat or completion chunks, each released by the test (`release(n)`) or at
//     once (`autoRelease`), so a test decides when tokens go out by events, not sleeps
//   - reports whatever load the test sets on /metrics (vLLM names), answers /health as told
//   - dies on demand: `failNext` = 'reset' (socket destroyed before any byte), 'headers' (headers,
//     then the socket destroyed), 'midstream' (after `failAfterTokens` tokens); `stop()` closes the
//     port (connection refused from then on)
//   - records every generation request (path, body bytes, whether the client aborted it), and how
//     many were open at once at most (`open`, and counters shared between stubs)
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';

export interface StubRequest {
  readonly path: string;
  readonly body: Buffer;
  readonly headers: http.IncomingHttpHeaders;
  /** Every body byte the stub wrote, in order. */
  readonly sent: Buffer[];
  /** The connection closed before the stub finished the response. */
  aborted: boolean;
  finished: boolean;
}

export interface StubUpstreamOptions {
  readonly model?: string;
  /** Tokens per response (default 4). */
  readonly tokens?: number;
  /** Tokens go out without waiting for `release` (default true). */
  readonly autoRelease?: boolean;
  /** With autoRelease, each token waits this long first (default 0: at once). */
  readonly tokenDelayMs?: number;
  /** Counters shared with other stubs (open requests across several upstreams), besides `open`. */
  readonly alsoCount?: readonly OpenCount[];
  /** Serve https with this key and certificate; with `ca`, also ask for a client certificate signed by it and refuse others. */
  readonly tls?: { readonly key: string; readonly cert: string; readonly ca?: string };
  /** Answer 401 to every request (GET /health excepted) without `Authorization: Bearer <bearer>`. */
  readonly bearer?: string;
  /** With autoRelease, send each whole stream (headers, events, end) in one socket write. */
  readonly oneWrite?: boolean;
}

/** Generation requests open now (arrived, neither finished nor aborted) and the most at once since the last reset. */
export class OpenCount {
  numOpen = 0;
  peak = 0;

  enter(): void {
    this.numOpen++;
    this.peak = Math.max(this.peak, this.numOpen);
  }

  leave(): void {
    this.numOpen--;
  }

  resetPeak(): void {
    this.peak = this.numOpen;
  }
}

type Waiter = () => void;

export class StubUpstream {
  readonly model: string;
  readonly requests: StubRequest[] = [];
  tokens: number;
  autoRelease: boolean;
  tokenDelayMs: number;
  healthStatus = 200;
  load = { waiting: 0, running: 0, kv: 0 };
  /** Sequence slots reported on /props as llama-server does (404 when null). */
  slots: number | null = null;
  /** Serve /metrics at all (404 when false). */
  metrics = true;
  failNext: 'reset' | 'headers' | 'midstream' | null = null;
  failAfterTokens = 1;
  /** This stub's open generation requests. */
  readonly open = new OpenCount();
  readonly #counts: readonly OpenCount[];
  /** A 4xx or 5xx answer to the next generation request: [status, body]. */
  answerNext: [number, unknown] | null = null;
  #server: http.Server;
  readonly #scheme: 'http' | 'https';
  readonly #bearer: string | null;
  readonly #oneWrite: boolean;
  /** Requests answered 401 for a missing or wrong bearer token. */
  numUnauthorized = 0;
  #url = '';
  #credits = 0;
  #waiters: Waiter[] = [];
  #requestWaiters: { n: number; resolve: () => void }[] = [];
  #abortWaiters: { resolve: () => void }[] = [];

  constructor(opts: StubUpstreamOptions = {}) {
    this.model = opts.model ?? 'stub-model';
    this.tokens = opts.tokens ?? 4;
    this.autoRelease = opts.autoRelease ?? true;
    this.tokenDelayMs = opts.tokenDelayMs ?? 0;
    this.#counts = [this.open, ...(opts.alsoCount ?? [])];
    this.#bearer = opts.bearer ?? null;
    this.#oneWrite = opts.oneWrite ?? false;
    const handle = (req: http.IncomingMessage, res: http.ServerResponse): void => this.#handle(req, res);
    const t = opts.tls;
    this.#scheme = t === undefined ? 'http' : 'https';
    this.#server = t === undefined
      ? http.createServer(handle)
      : https.createServer({ key: t.key, cert: t.cert, ...(t.ca === undefined ? {} : { ca: t.ca, requestCert: true, rejectUnauthorized: true }) }, handle);
  }

  get url(): string {
    return this.#url;
  }

  async start(port = 0): Promise<this> {
    await new Promise<void>((r) => this.#server.listen(port, '127.0.0.1', r));
    this.#url = `${this.#scheme}://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
    return this;
  }

  /** Close the port and every connection: from now on, connection refused. */
  stop(): Promise<void> {
    return new Promise((r) => {
      this.#server.closeAllConnections();
      this.#server.close(() => r());
    });
  }

  /** Let `n` more tokens out (across all streams waiting). */
  release(n = 1): void {
    this.#credits += n;
    while (this.#credits > 0 && this.#waiters.length > 0) {
      this.#credits--;
      this.#waiters.shift()!();
    }
  }

  /** Resolves once `n` generation requests have arrived in total. */
  waitForRequests(n: number): Promise<void> {
    if (this.requests.length >= n) return Promise.resolve();
    return new Promise((resolve) => this.#requestWaiters.push({ n, resolve }));
  }

  /** Resolves once some request's connection closed before its response was finished. */
  waitForAbort(): Promise<void> {
    if (this.requests.some((r) => r.aborted)) return Promise.resolve();
    return new Promise((resolve) => this.#abortWaiters.push({ resolve }));
  }

  #token(): Promise<void> {
    if (this.autoRelease) return this.tokenDelayMs > 0 ? new Promise((r) => setTimeout(r, this.tokenDelayMs)) : Promise.resolve();
    if (this.#credits > 0) {
      this.#credits--;
      return Promise.resolve();
    }
    return new Promise((r) => this.#waiters.push(r));
  }

  #handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const path = (req.url ?? '/').split('?')[0]!;
    if (this.#bearer !== null && !(req.method === 'GET' && path === '/health') && req.headers.authorization !== `Bearer ${this.#bearer}`) {
      this.numUnauthorized++;
      res.writeHead(401, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: 'invalid api key', type: 'authentication_error', code: 'invalid_api_key' } }));
      return;
    }
    if (req.method === 'GET') {
      if (path === '/health') {
        res.writeHead(this.healthStatus, { 'content-type': 'application/json' }).end(JSON.stringify({ status: this.healthStatus === 200 ? 'ok' : 'failed' }));
      } else if (path === '/v1/models') {
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ object: 'list', data: [{ id: this.model, object: 'model', max_model_len: 4096 }] }));
      } else if (path === '/props' && this.slots !== null) {
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ total_slots: this.slots }));
      } else if (path === '/metrics' && this.metrics) {
        const l = this.load;
        const m = `model_name="${this.model}"`;
        res.writeHead(200, { 'content-type': 'text/plain' }).end(`# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{${m}} ${l.waiting}\nvllm:num_requests_running{${m}} ${l.running}\nvllm:kv_cache_usage_perc{${m}} ${l.kv}\n`);
      } else {
        res.writeHead(404).end();
      }
      return;
    }
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => void this.#generate(path, Buffer.concat(parts), req, res));
  }

  async #generate(path: string, body: Buffer, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const record: StubRequest = { path, body, headers: req.headers, sent: [], aborted: false, finished: false };
    const write = res.write.bind(res);
    const send = (text: string): void => {
      record.sent.push(Buffer.from(text));
      write(text);
    };
    this.requests.push(record);
    for (const c of this.#counts) c.enter();
    let open = true;
    const closed = (): void => {
      if (open) for (const c of this.#counts) c.leave();
      open = false;
    };
    res.on('finish', closed);
    res.on('close', () => {
      closed();
      if (record.finished) return;
      record.aborted = true;
      for (const w of this.#abortWaiters.splice(0)) w.resolve();
    });
    for (const w of [...this.#requestWaiters]) {
      if (this.requests.length >= w.n) {
        this.#requestWaiters.splice(this.#requestWaiters.indexOf(w), 1);
        w.resolve();
      }
    }
    const fail = this.failNext;
    this.failNext = null;
    if (fail === 'reset') {
      req.socket.destroy();
      return;
    }
    const answer = this.answerNext;
    this.answerNext = null;
    if (answer !== null) {
      record.finished = true;
      res.writeHead(answer[0], { 'content-type': 'application/json' }).end(JSON.stringify(answer[1]));
      return;
    }
    const j = JSON.parse(body.toString('utf8')) as { stream?: boolean; max_tokens?: number };
    const chat = path === '/v1/chat/completions';
    const n = Math.min(this.tokens, j.max_tokens ?? this.tokens);
    const id = `stub-${this.requests.length}`;
    if (j.stream !== true) {
      for (let i = 0; i < n; i++) await this.#token();
      const text = Array.from({ length: n }, (_, i) => ` t${i}`).join('');
      const choice = chat ? { index: 0, message: { role: 'assistant', content: text }, finish_reason: 'length' } : { index: 0, text, finish_reason: 'length' };
      record.finished = true;
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ id, object: chat ? 'chat.completion' : 'text_completion', model: this.model, choices: [choice], usage: { prompt_tokens: 3, completion_tokens: n, total_tokens: 3 + n } }));
      return;
    }
    // One write: corked from the headers to the end, which uncorks (tokens released at once all come in this tick).
    if (this.#oneWrite && this.autoRelease && this.tokenDelayMs === 0) res.cork();
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    if (fail === 'headers') {
      res.flushHeaders();
      setImmediate(() => req.socket.destroy());
      return;
    }
    const chunk = (delta: string, finish: string | null): string =>
      chat
        ? `data: {"id":"${id}","object":"chat.completion.chunk","model":"${this.model}","choices":[{"index":0,"delta":{"content":"${delta}"},"finish_reason":${finish === null ? 'null' : `"${finish}"`}}]}\n\n`
        : `data: {"id":"${id}","object":"text_completion","model":"${this.model}","choices":[{"index":0,"text":"${delta}","finish_reason":${finish === null ? 'null' : `"${finish}"`}}]}\n\n`;
    for (let i = 0; i < n; i++) {
      await this.#token();
      if (res.destroyed) return;
      if (fail === 'midstream' && i === this.failAfterTokens) {
        // Half an event, then the connection dies.
        send('data: {"id":"half');
        setImmediate(() => req.socket.destroy());
        return;
      }
      send(chunk(` t${i}`, i === n - 1 ? 'length' : null));
    }
    record.finished = true;
    send('data: [DONE]\n\n');
    res.end();
  }
}

export async function startStubs(n: number, opts: StubUpstreamOptions = {}): Promise<StubUpstream[]> {
  return Promise.all(Array.from({ length: n }, () => new StubUpstream(opts).start()));
}
