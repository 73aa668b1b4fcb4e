// /v1/responses names its own fields in errors: a prompt past the context is `input` or the item
// `input.N.content` (chat's `messages` is not a field of this API), however the input is given and
// whichever check finds it (the message count before the schema, the sizes before tokenizing).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startTestServer } from '../helpers/headroom.ts';
import type { TestServer } from '../helpers/headroom.ts';

let server: TestServer;
before(async () => {
  server = await startTestServer({ mock: { cost: { speed: 0 }, contextTokens: 512 } });
});
after(async () => {
  await server.close();
});

async function respond(body: object): Promise<{ status: number; error: { code: string; param: string | null; message: string } }> {
  const res = await fetch(`${server.url}/v1/responses`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'headroom-mock', max_output_tokens: 16, ...body }) });
  return { status: res.status, error: ((await res.json()) as { error: { code: string; param: string | null; message: string } }).error };
}

test('a Responses input past the context is a 400 context_length_exceeded naming input', async () => {
  const long = 'the queue keeps every request inside its budget '.repeat(200);
  const many = Array.from({ length: 600 }, (_, i) => ({ role: i % 2 === 0 ? 'user' : 'assistant', content: `turn ${i}` }));
  const cases: [string, object][] = [
    ['a long string', { input: long }],
    ['a long message', { input: [{ role: 'user', content: long }] }],
    ['many messages', { input: many }],
    ['instructions and a long message', { instructions: 'Be brief.', input: [{ role: 'user', content: long }] }],
  ];
  for (const [name, body] of cases) {
    const r = await respond(body);
    assert.equal(r.status, 400, `${name}: ${JSON.stringify(r.error)}`);
    assert.equal(r.error.code, 'context_length_exceeded', name);
    // The whole input, or the one item past the limit (as chat names messages.N.content).
    assert.match(r.error.param ?? '', /^input(\.\d+\.content)?$/, `${name}: ${r.error.param}`);
  }
});
