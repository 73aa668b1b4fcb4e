// The floor under any proxy written for Node: a bare reverse proxy with nothing of the gateway's
// work — node:http in front, an undici pool behind (the same client the gateway uses), the body
// read whole and sent on, the upstream's bytes written back as they come. No routing, no JSON, no
// flow control, no metrics. overhead.ts runs it as an arm so that the gateway's cost splits into
// what Node's HTTP stack costs anyone (this arm against nginx) and what Headroom adds on top (the
// gateway against this arm). It is a measuring stick, not a server: no error handling beyond a 502.
//
//   node --import tsx bench/gateway/node-floor.ts --upstream URL [--port 8344]
import http from 'node:http';
import { parseArgs } from 'node:util';
import { Pool } from 'undici';

const { values } = parseArgs({ options: { upstream: { type: 'string' }, port: { type: 'string', default: '8344' } } });
if (values.upstream === undefined) throw new Error('--upstream URL is required');
const pool = new Pool(values.upstream, { connections: 128 });

const server = http.createServer((req, res) => {
  const parts: Buffer[] = [];
  req.on('data', (c: Buffer) => parts.push(c));
  req.on('end', () => {
    pool.request({ path: req.url ?? '/', method: (req.method ?? 'GET'), body: parts.length === 0 ? null : Buffer.concat(parts), headers: { 'content-type': req.headers['content-type'] ?? 'application/json' } }).then(
      async (up) => {
        res.writeHead(up.statusCode, { 'content-type': String(up.headers['content-type'] ?? 'application/octet-stream') });
        for await (const chunk of up.body) res.write(chunk);
        res.end();
      },
      () => {
        if (!res.headersSent) res.writeHead(502);
        res.end();
      },
    );
  });
});
server.listen(Number(values.port), '127.0.0.1');
process.on('SIGTERM', () => {
  server.close();
  void pool.close().then(() => process.exit(0));
});
