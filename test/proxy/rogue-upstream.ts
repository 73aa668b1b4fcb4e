// An upstream that misbehaves on purpose, for the gateway's untrusted-upstream tests: it answers
// its probes like any healthy OpenAI server (so only what it does to requests can take it out of
// rotation) and answers generation requests as `behaviour` says:
//
//   html        200 text/html (a login page, a load balancer's error page)
//   notjson     200 text/event-stream whose first event is `data: notjson{{`
//   huge        200 text/event-stream whose first event is one `data:` line of HUGE_EVENT_BYTES
//   stall       200 text/event-stream headers, then nothing (the connection stays open)
//   good-stall  one good event, then nothing
//   good-bad    one good event, then `data: notjson{{`
//   good-huge   one good event, then a `data:` line of HUGE_EVENT_BYTES
//
// `metricsBytes` > 0 makes /metrics that many bytes of valid-looking Prometheus text.
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export type Behaviour = 'html' | 'notjson' | 'huge' | 'stall' | 'good-stall' | 'good-bad' | 'good-huge';

export const HUGE_EVENT_BYTES = 10 << 20;
/** Written in pieces, as a socket would carry them; one buffer made once (its memory is the test's, not the gateway's). */
const PIECE = Buffer.alloc(64 << 10, 'x');
const GOOD = 'data: {"id":"r","object":"chat.completion.chunk","model":"stub-model","choices":[{"index":0,"delta":{"content":" ok"},"finish_reason":null}]}\n\n';

export class RogueUpstream {
  behaviour: Behaviour;
  metricsBytes = 0;
  kv = 0;
  numRequests = 0;
  /** Generation requests whose connection the gateway closed. */
  numClosedByGateway = 0;
  readonly #server: http.Server;
  #url = '';

  constructor(behaviour: Behaviour) {
    this.behaviour = behaviour;
    this.#server = http.createServer((req, res) => this.#handle(req, res));
  }

  get url(): string {
    return this.#url;
  }

  async start(): Promise<this> {
    await new Promise<void>((r) => this.#server.listen(0, '127.0.0.1', r));
    this.#url = `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
    return this;
  }

  stop(): Promise<void> {
    return new Promise((r) => {
      this.#server.closeAllConnections();
      this.#server.close(() => r());
    });
  }

  #handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const path = (req.url ?? '/').split('?')[0]!;
    if (req.method === 'GET') {
      if (path === '/health') res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"ok"}');
      else if (path === '/v1/models') res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ object: 'list', data: [{ id: 'stub-model', object: 'model' }] }));
      else if (path === '/metrics') this.#metrics(res);
      else res.writeHead(404).end();
      return;
    }
    req.resume();
    req.on('end', () => this.#generate(res));
  }

  #metrics(res: http.ServerResponse): void {
    const head = `vllm:num_requests_waiting 0\nvllm:num_requests_running 0\nvllm:kv_cache_usage_perc ${this.kv}\n`;
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.write(head);
    if (this.metricsBytes > 0) this.#pour(res, this.metricsBytes, () => res.end('\n'), '# ');
    else res.end();
  }

  #generate(res: http.ServerResponse): void {
    this.numRequests++;
    res.on('close', () => {
      if (!res.writableFinished) this.numClosedByGateway++;
    });
    const b = this.behaviour;
    if (b === 'html') {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end('<html><body><h1>Sign in</h1></body></html>');
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.flushHeaders();
    if (b === 'stall') return;
    if (b === 'notjson') {
      res.write('data: notjson{{\n\n');
      return;
    }
    if (b === 'huge') {
      this.#pour(res, HUGE_EVENT_BYTES, () => res.write('\n\n'), 'data: ');
      return;
    }
    res.write(GOOD);
    if (b === 'good-stall') return;
    if (b === 'good-bad') res.write('data: notjson{{\n\n');
    else this.#pour(res, HUGE_EVENT_BYTES, () => res.write('\n\n'), 'data: ');
  }

  /** `n` bytes after `prefix`, in 64 KiB pieces, respecting backpressure; stops when the reader goes. */
  #pour(res: http.ServerResponse, n: number, then: () => void, prefix: string): void {
    res.write(prefix);
    let left = n;
    const more = (): void => {
      while (left > 0 && !res.destroyed) {
        const piece = left >= PIECE.length ? PIECE : PIECE.subarray(0, left);
        left -= piece.length;
        if (!res.write(piece)) {
          res.once('drain', more);
          return;
        }
      }
      if (!res.destroyed) then();
    };
    more();
  }
}
