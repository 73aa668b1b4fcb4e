// A pass-through in front of llama-server for the peer benchmark. Chat completions go to
// llama-server unchanged except for OpenAI's untruncated sampling where the request does not set
// top_k, min_p or top_p (OPENAI_SAMPLING below), and one added field: `logit_bias` that bans the vocabulary's 256
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
// request, copying bytes. A request's own `logit_bias` (the natural-length workloads put one on
// the EOS token, src/harness/natural-length.ts) is kept beside the ban. There the ban shortens
// outputs a little: under flat logits EOS is drawn from 256 fewer tokens, so with the generated
// 8,000-token vocab a workload's mean length is about 3% shorter on llama-server than asked.
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

/**
 * OpenAI's sampling, which Headroom follows: temperature (and top_p when sent) over the whole
 * vocabulary. llama-server truncates by default (top_k 40, min_p 0.05), which on the nearly flat
 * logits of a random-weight model with an EOS bias keeps EOS and little else: outputs of a
 * natural-length workload averaged 4 tokens instead of ~130. A request's own values win.
 */
const OPENAI_SAMPLING = { top_k: 0, min_p: 0, top_p: 1 };

/** A request's own logit_bias as [id, bias] pairs: OpenAI's object form {"id": bias} or llama-server's array form. */
function ownBias(bias: unknown): Array<readonly [number, number | false]> {
  if (Array.isArray(bias)) return bias as Array<[number, number | false]>;
  if (bias === null || typeof bias !== 'object') return [];
  return Object.entries(bias as Record<string, number>).map(([id, b]) => [Number(id), b] as const);
}

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
    body = Buffer.from(JSON.stringify({ ...OPENAI_SAMPLING, ...chat, logit_bias: [...BYTE_TOKEN_BAN, ...ownBias(chat.logit_bias)] }));
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
