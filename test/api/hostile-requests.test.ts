// A table of malformed and hostile requests: each gets the right 4xx and OpenAI error JSON, no
// request is lost, and the server serves normally afterwards with nothing held.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { request } from 'undici';
import type { TestServer } from '../helpers/headroom.ts';
import { startTestServer, waitForIdle } from '../helpers/headroom.ts';

let server: TestServer;
const CONTEXT = 256;

before(async () => {
  server = await startTestServer({ mock: { contextTokens: CONTEXT }, server: { bodyLimitBytes: 64 * 1024, maxOutputTokens: 200 } });
});
after(() => server.close());

const chat = (extra: Record<string, unknown>): Record<string, unknown> => ({ model: 'headroom-mock', messages: [{ role: 'user', content: 'hi' }], ...extra });
const cmpl = (extra: Record<string, unknown>): Record<string, unknown> => ({ model: 'headroom-mock', prompt: 'hi', ...extra });

interface Case {
  name: string;
  path?: string;
  method?: 'POST' | 'GET' | 'PUT';
  body?: string | Buffer | Record<string, unknown> | unknown[];
  headers?: Record<string, string>;
  status: number;
  code: string;
  param?: string;
}

const CASES: Case[] = [
  { name: 'malformed JSON', body: '{"model": "headroom-mock", "messages": [', status: 400, code: 'invalid_json' },
  { name: 'empty body', body: '', status: 400, code: 'invalid_json' },
  { name: 'JSON array body', body: [], status: 400, code: 'invalid_value' },
  { name: 'JSON string body', body: '"hello"', status: 400, code: 'invalid_value' },
  { name: 'JSON null body', body: 'null', status: 400, code: 'invalid_value' },
  { name: 'missing model', body: { messages: [{ role: 'user', content: 'hi' }] }, status: 400, code: 'missing_field', param: 'model' },
  { name: 'model of the wrong type', body: chat({ model: 123 }), status: 400, code: 'invalid_value', param: 'model' },
  { name: 'unknown model', body: chat({ model: 'gpt-17' }), status: 404, code: 'model_not_found', param: 'model' },
  { name: 'missing messages', body: { model: 'headroom-mock' }, status: 400, code: 'missing_field', param: 'messages' },
  { name: 'empty messages', body: chat({ messages: [] }), status: 400, code: 'invalid_value', param: 'messages' },
  { name: 'messages not an array', body: chat({ messages: 'hi' }), status: 400, code: 'invalid_value', param: 'messages' },
  { name: 'unknown role', body: chat({ messages: [{ role: 'wizard', content: 'hi' }] }), status: 400, code: 'invalid_value', param: 'messages.0.role' },
  { name: 'content of the wrong type', body: chat({ messages: [{ role: 'user', content: 42 }] }), status: 400, code: 'invalid_value', param: 'messages.0.content' },
  { name: 'negative max_tokens', body: chat({ max_tokens: -5 }), status: 400, code: 'invalid_value', param: 'max_tokens' },
  { name: 'zero max_tokens', body: chat({ max_tokens: 0 }), status: 400, code: 'invalid_value', param: 'max_tokens' },
  { name: 'huge max_tokens', body: chat({ max_tokens: 1e9 }), status: 400, code: 'context_length_exceeded', param: 'max_tokens' },
  { name: 'max_tokens above the server cap', path: '/v1/completions', body: cmpl({ max_tokens: 201 }), status: 400, code: 'invalid_value', param: 'max_tokens' },
  { name: 'fractional max_tokens', body: chat({ max_tokens: 1.5 }), status: 400, code: 'invalid_value', param: 'max_tokens' },
  { name: 'max_tokens as a string', body: chat({ max_tokens: '10' }), status: 400, code: 'invalid_value', param: 'max_tokens' },
  { name: 'negative max_completion_tokens', body: chat({ max_completion_tokens: -1 }), status: 400, code: 'invalid_value', param: 'max_completion_tokens' },
  { name: 'negative temperature', body: chat({ temperature: -1 }), status: 400, code: 'invalid_value', param: 'temperature' },
  { name: 'temperature above 2', body: chat({ temperature: 5 }), status: 400, code: 'invalid_value', param: 'temperature' },
  { name: 'top_p of 0', body: chat({ top_p: 0 }), status: 400, code: 'invalid_value', param: 'top_p' },
  { name: 'top_p above 1', body: chat({ top_p: 2 }), status: 400, code: 'invalid_value', param: 'top_p' },
  { name: 'n = 9 (above the limit of 8)', body: chat({ n: 9 }), status: 400, code: 'unsupported_value', param: 'n' },
  { name: 'five stop strings', body: chat({ stop: ['a', 'b', 'c', 'd', 'e'] }), status: 400, code: 'invalid_value', param: 'stop' },
  { name: 'empty stop string', body: chat({ stop: '' }), status: 400, code: 'invalid_value', param: 'stop' },
  { name: 'stream as a string', body: chat({ stream: 'yes' }), status: 400, code: 'invalid_value', param: 'stream' },
  { name: 'seed as a string', body: chat({ seed: 'abc' }), status: 400, code: 'invalid_value', param: 'seed' },
  { name: 'stream_options of the wrong type', body: chat({ stream: true, stream_options: 'usage' }), status: 400, code: 'invalid_value', param: 'stream_options' },
  { name: 'stream_options without stream', body: chat({ stream_options: { include_usage: true } }), status: 400, code: 'invalid_value', param: 'stream_options' },
  { name: 'oversized body', body: chat({ messages: [{ role: 'user', content: 'x'.repeat(100 * 1024) }] }), status: 413, code: 'body_too_large' },
  { name: 'invalid UTF-8', body: Buffer.concat([Buffer.from('{"model":"headroom-mock","prompt":"'), Buffer.from([0xc3, 0x28, 0xff]), Buffer.from('"}')]), path: '/v1/completions', status: 400, code: 'invalid_encoding' },
  { name: 'chat prompt longer than the context', body: chat({ messages: [{ role: 'user', content: 'zq'.repeat(CONTEXT) }] }), status: 400, code: 'context_length_exceeded', param: 'messages' },
  { name: 'completion prompt longer than the context', path: '/v1/completions', body: cmpl({ prompt: 'qz'.repeat(CONTEXT) }), status: 400, code: 'context_length_exceeded', param: 'prompt' },
  { name: 'prompt + max_tokens over the context', path: '/v1/completions', body: cmpl({ prompt: 'qz'.repeat(CONTEXT / 2 - 10), max_tokens: 100 }), status: 400, code: 'context_length_exceeded', param: 'max_tokens' },
  { name: 'empty completion prompt', path: '/v1/completions', body: cmpl({ prompt: '' }), status: 400, code: 'invalid_value', param: 'prompt' },
  { name: 'missing completion prompt', path: '/v1/completions', body: { model: 'headroom-mock' }, status: 400, code: 'invalid_value', param: 'prompt' },
  { name: 'completion prompt as an object', path: '/v1/completions', body: cmpl({ prompt: { text: 'hi' } }), status: 400, code: 'invalid_value', param: 'prompt' },
  { name: 'negative token id in prompt', path: '/v1/completions', body: cmpl({ prompt: [1, -4] }), status: 400, code: 'invalid_value' },
  { name: 'token id outside the vocabulary', path: '/v1/completions', body: cmpl({ prompt: [1, 99999999] }), status: 400, code: 'invalid_value', param: 'prompt' },
  { name: 'echo=true', path: '/v1/completions', body: cmpl({ echo: true }), status: 400, code: 'unsupported_value', param: 'echo' },
  { name: 'text/plain body', body: 'hello', headers: { 'content-type': 'text/plain' }, status: 415, code: 'unsupported_media_type' },
  { name: 'non-numeric x-slo-ms', body: chat({}), headers: { 'x-slo-ms': 'soon' }, status: 400, code: 'invalid_value', param: 'x-slo-ms' },
  { name: 'zero x-slo-ms', body: chat({}), headers: { 'x-slo-ms': '0' }, status: 400, code: 'invalid_value', param: 'x-slo-ms' },
  { name: 'unknown route', path: '/v1/moderations', body: chat({}), status: 404, code: 'route_not_found' },
  { name: 'GET on a POST route', method: 'GET', status: 405, code: 'method_not_allowed' },
];

test(`a table of ${CASES.length} malformed or hostile requests each get the right 4xx and OpenAI error JSON`, async () => {
  assert.ok(CASES.length >= 30);
  for (const c of CASES) {
    const body = c.body === undefined ? undefined : typeof c.body === 'string' || Buffer.isBuffer(c.body) ? c.body : JSON.stringify(c.body);
    const res = await request(`${server.url}${c.path ?? '/v1/chat/completions'}`, {
      method: c.method ?? 'POST',
      headers: { 'content-type': 'application/json', ...c.headers },
      ...(body === undefined ? {} : { body }),
    });
    const text = await res.body.text();
    assert.equal(res.statusCode, c.status, `${c.name}: status ${res.statusCode}, body ${text}`);
    const json = JSON.parse(text) as { error?: { message?: unknown; type?: unknown; param?: unknown; code?: unknown } };
    assert.ok(json.error, `${c.name}: no error object in ${text}`);
    assert.equal(typeof json.error.message, 'string', c.name);
    assert.ok((json.error.message as string).length > 0, c.name);
    assert.equal(typeof json.error.type, 'string', c.name);
    assert.equal(json.error.code, c.code, `${c.name}: ${text}`);
    if (c.param !== undefined) assert.equal(json.error.param, c.param, `${c.name}: ${text}`);
  }
  // Nothing was admitted by a refused request, and the server still serves.
  await waitForIdle(server.headroom);
  const stats = server.headroom.engine.stats();
  assert.equal(stats.numSubmitted, 0, 'a refused request reached the engine');
  const ok = await request(`${server.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(chat({ max_tokens: 3 })) });
  assert.equal(ok.statusCode, 200);
  const json = (await ok.body.json()) as { usage: { completion_tokens: number } };
  assert.equal(json.usage.completion_tokens, 3);
});
