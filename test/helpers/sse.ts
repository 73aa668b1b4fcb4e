// A minimal SSE reader for tests that need the raw stream (the openai client hides framing).
import http from 'node:http';
import { request } from 'undici';

export interface StreamResult {
  readonly status: number;
  readonly text: string;
  readonly finishReason: string | null;
  readonly chunks: { id: string; choices: { text?: string; delta?: { content?: string }; finish_reason: string | null }[]; usage?: unknown }[];
  readonly sawDone: boolean;
}

export async function streamCompletion(url: string, body: unknown, path = '/v1/completions', headers: Record<string, string> = {}): Promise<StreamResult> {
  const res = await request(`${url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  const raw = await res.body.text();
  const chunks: StreamResult['chunks'] = [];
  let sawDone = false;
  for (const frame of raw.split('\n\n')) {
    if (!frame.startsWith('data: ')) continue;
    const data = frame.slice(6);
    if (data === '[DONE]') sawDone = true;
    else chunks.push(JSON.parse(data) as StreamResult['chunks'][number]);
  }
  let text = '';
  let finishReason: string | null = null;
  for (const c of chunks) {
    for (const ch of c.choices ?? []) {
      text += ch.text ?? ch.delta?.content ?? '';
      finishReason = ch.finish_reason ?? finishReason;
    }
  }
  return { status: res.statusCode, text, finishReason, chunks, sawDone };
}

/** Open a stream, read `frames` SSE frames, then destroy the socket. Resolves when the socket is gone. */
export function readThenHangUp(url: string, body: unknown, frames: number, stream = true): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' } }, (res) => {
      let seen = 0;
      res.on('data', (buf: Buffer) => {
        seen += buf.toString().split('\n\n').filter((f) => f.startsWith('data: ')).length;
        if (seen >= frames) {
          req.destroy();
          resolve(seen);
        }
      });
      res.on('end', () => reject(new Error(`the stream ended after ${seen} frames before we hung up`)));
    });
    req.on('error', () => undefined);
    req.end(JSON.stringify({ ...body as object, stream }));
    if (!stream) setTimeout(() => (req.destroy(), resolve(0)), frames);
  });
}
