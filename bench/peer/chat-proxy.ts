// A pass-through in front of llama-server for the peer benchmark. Chat completions go to
// llama-server unchanged except for one added field: `logit_bias` that bans the vocabulary's 256
// byte-fallback tokens (ids 3..258 in Headroom's generated SPM vocab: <unk>, <s>, </s>, then
// <0x00>..<0xFF>). Every other request, and every response byte, passes through as is.
//
// Why: llama-server runs every completion's text through its PEG chat parser (chat and plain
// completions alike, even with --no-jinja, where the parser is "content only"), and that parser
// rejects malformed UTF-8: the request fails mid-stream with "The model produced output that does
// not match the expected ... format". A random-weight model emits lone byte tokens, i.e. malformed
// UTF-8, within a few dozen tokens, so without the ban most llama-server requests fail for a reason
// that says nothing about serving. With it, every sampled token is a whole word piece (valid
// UTF-8). The work per request is unchanged: output length is fixed by max_tokens + ignore_eos,
// and a 256-entry bias costs nothing next to a decode step. The hop is one local socket per
// request, copying bytes.
//
//   node --import tsx bench/peer/chat-proxy.ts --port 8321 --upstream http://127.0.0.1:8322

import { createServer } from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { parseArgs } from 'node:util';
import { Agent, request } from 'undici';

const { values } = parseArgs({ options: { port: { type: 'string', default: '8321' }, upstream: { type: 'string', default: 'http://127.0.0.1:8322' } } });
const port = Number(values.port);
const upstream = new URL(values.upstream);
// No connection limit: a limit would be backpressure the harness deliberately avoids.
const agent = new Agent({ connections: null, headersTimeout: 0, bodyTimeout: 0 });

/** Byte-fallback token ids of the generated vocab (src/model/spm-vocab.ts), banned as [id, false]. */
const BYTE_TOKEN_BAN: ReadonlyArray<readonly [number, false]> = Array.from({ length: 256 }, (_, i) => [3 + i, false] as const);

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

async function forward(req: IncomingMessage, res: ServerResponse): Promise<void> {
  const path = req.url ?? '/';
  let body: Buffer | undefined = req.method === 'POST' ? await readBody(req) : undefined;
  if (req.method === 'POST' && path.startsWith('/v1/chat/completions') && body !== undefined) {
    const chat = JSON.parse(body.toString('utf8')) as Record<string, unknown>;
    body = Buffer.from(JSON.stringify({ ...chat, logit_bias: BYTE_TOKEN_BAN }));
  }
  const ac = new AbortController();
  res.on('close', () => ac.abort()); // the client went away: cancel upstream, so llama-server stops the slot
  try {
    const up = await request(new URL(path, upstream), {
      method: req.method as 'GET' | 'POST',
      headers: { 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body }),
      dispatcher: agent,
      signal: ac.signal,
    });
    res.writeHead(up.statusCode, { 'content-type': String(up.headers['content-type'] ?? 'application/json') });
    for await (const chunk of up.body) res.write(chunk as Buffer);
    res.end();
  } catch (err) {
    if (!res.headersSent) res.writeHead(502, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ error: { message: `proxy: ${String(err)}`, type: 'proxy_error' } }));
  }
}

createServer((req, res) => void forward(req, res)).listen(port, '127.0.0.1', () => console.log(`chat-proxy on http://127.0.0.1:${port} -> ${upstream.href}`));
