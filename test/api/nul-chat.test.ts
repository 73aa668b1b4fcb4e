// A NUL character in a chat message reaches the chat template with everything after it: the
// prompt is billed as the same number of tokens /v1/completions gives the same templated text.
// (llama.cpp's template takes C strings; this used to bill "abc\0" + 3,000 chars as "abc".)
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { request } from 'undici';
import type { TestServer } from '../helpers/headroom.ts';
import { startTestServer } from '../helpers/headroom.ts';
import { openTinyRunner } from '../engine/runner/llama/fixture.ts';

let server: TestServer;

before(async () => {
  server = await startTestServer({ runner: await openTinyRunner({ threads: 1, contextTokens: 8192, maxSequences: 2 }) });
});
after(() => server.close());

async function promptTokens(path: string, body: Record<string, unknown>): Promise<number> {
  const res = await request(`${server.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: server.runner.info.modelId, max_tokens: 1, ...body }) });
  const json = (await res.body.json()) as { usage?: { prompt_tokens: number }; error?: unknown };
  assert.equal(res.statusCode, 200, JSON.stringify(json));
  return json.usage!.prompt_tokens;
}

const chatml = (messages: { role: string; content: string }[]): string => messages.map((m) => `<|im_start|>${m.role}\n${m.content}<|im_end|>\n`).join('') + '<|im_start|>assistant\n';

test('NUL in a chat message is templated with the bytes after it (token counts match /v1/completions)', async () => {
  assert.match(String(server.runner.info.details['chatTemplate']), /^chatml/);
  for (const content of ['abc\u0000' + 'x y z '.repeat(500), '\u0000', 'a\u0000\u0000b', 'é\u0000中\u0000']) {
    const messages = [{ role: 'system', content: 'be brief' }, { role: 'user', content }];
    const chat = await promptTokens('/v1/chat/completions', { messages });
    const completion = await promptTokens('/v1/completions', { prompt: chatml(messages) });
    assert.equal(chat, completion, `content ${JSON.stringify(content.slice(0, 12))}`);
    const cut = await promptTokens('/v1/completions', { prompt: chatml([messages[0]!, { role: 'user', content: content.split('\u0000')[0]! }]) });
    if (content.split('\u0000').slice(1).join('').length > 0) assert.ok(chat > cut, 'the text after NUL was dropped');
  }
});
