// Reading an upstream's body to a bound. The gateway trusts no upstream to keep its bodies small: a
// probe page or a /metrics scrape read whole (`body.text()`) let one 50 MB /metrics take the
// gateway from ~140 to ~237 MB (test/proxy/untrusted.test.ts). Here the body is read in its
// chunks, and the connection is closed as soon as it passes the bound, so at most `maxBytes` plus
// one chunk is ever held.

import type { Dispatcher } from 'undici';

export type BoundedBody = { readonly ok: true; readonly text: string } | { readonly ok: false; readonly reason: string };

export async function readBounded(body: Dispatcher.ResponseData['body'], maxBytes: number): Promise<BoundedBody> {
  const parts: Buffer[] = [];
  let n = 0;
  for await (const chunk of body as AsyncIterable<Buffer>) {
    n += chunk.length;
    if (n > maxBytes) {
      body.destroy();
      return { ok: false, reason: `the body is over ${maxBytes} bytes` };
    }
    parts.push(chunk);
  }
  return { ok: true, text: Buffer.concat(parts).toString('utf8') };
}
