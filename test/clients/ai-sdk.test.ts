// The Vercel AI SDK (`ai` + `@ai-sdk/openai`) against the real server (mock runner). Its default
// `openai(model)` speaks the Responses API (/v1/responses); `openai.chat(model)` speaks chat
// completions. Text, streaming, usage, stop sequences, aborts, and an unsupported field (tools)
// surfacing as the SDK's typed APICallError. The SDK has no `n`.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createOpenAI } from '@ai-sdk/openai';
import type { OpenAIProvider } from '@ai-sdk/openai';
import { APICallError, Output, generateText, jsonSchema, streamText, tool } from 'ai';
import type { TestServer } from '../helpers/headroom.ts';
import { MODEL, assertAbortFreed, baseline, startClientServer } from './client-server.ts';

let server: TestServer;
let openai: OpenAIProvider;
const requests: string[] = [];
before(async () => {
  server = await startClientServer();
  const recordingFetch: typeof fetch = (input, init) => {
    requests.push(new URL(input instanceof Request ? input.url : String(input)).pathname);
    return fetch(input, init);
  };
  openai = createOpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', fetch: recordingFetch });
});
after(() => server.close());

/** The path the SDK called for `run`. */
async function pathOf<T>(run: () => Promise<T>): Promise<{ path: string | undefined; result: T }> {
  const n = requests.length;
  const result = await run();
  return { path: requests[n], result };
}

/** The SDK's typed error for a 400 unsupported_value naming `param` (the server's JSON is its responseBody). */
function isRefusal(e: unknown, param: string): boolean {
  assert.ok(APICallError.isInstance(e), `expected an APICallError, got ${String(e)}`);
  assert.equal(e.statusCode, 400);
  assert.equal(e.isRetryable, false);
  const error = (JSON.parse(e.responseBody ?? '{}') as { error: { code: string; param: string | null } }).error;
  assert.deepEqual([error.code, error.param], ['unsupported_value', param]);
  return true;
}

describe('the default model: the Responses API', () => {
  test('generateText: text, usage, finish reason length at maxOutputTokens', async () => {
    const { path, result } = await pathOf(() => generateText({ model: openai(MODEL), system: 'be brief', prompt: 'tell me about the river', maxOutputTokens: 7, maxRetries: 0 }));
    assert.equal(path, '/v1/responses');
    assert.ok(result.text.length > 0);
    assert.equal(result.finishReason, 'length');
    assert.equal(result.usage.outputTokens, 7);
    assert.ok((result.usage.inputTokens ?? 0) > 0);
  });

  test('streamText: the streamed text, usage and finish reason', async () => {
    const result = streamText({ model: openai(MODEL), prompt: 'hello there', maxOutputTokens: 9, maxRetries: 0 });
    let text = '';
    for await (const t of result.textStream) text += t;
    assert.ok(text.length > 0);
    assert.equal(text, await result.text);
    assert.equal((await result.usage).outputTokens, 9);
    assert.equal(await result.finishReason, 'length');
  });

  test('a multi-turn conversation (assistant turns as output_text) is served', async () => {
    const result = await generateText({
      model: openai(MODEL),
      messages: [{ role: 'user', content: 'hi' }, { role: 'assistant', content: 'hello' }, { role: 'user', content: 'and then?' }],
      maxOutputTokens: 3,
      maxRetries: 0,
    });
    assert.equal(result.usage.outputTokens, 3);
  });

  test('a follow-up built from an earlier result: inline with store false, a typed 400 naming the item reference without', async () => {
    const first = await generateText({ model: openai(MODEL), prompt: 'hi', maxOutputTokens: 3, maxRetries: 0 });
    const messages = [{ role: 'user' as const, content: 'hi' }, ...first.response.messages, { role: 'user' as const, content: 'and then?' }];
    const inline = await generateText({ model: openai(MODEL), messages, maxOutputTokens: 3, maxRetries: 0, providerOptions: { openai: { store: false } } });
    assert.equal(inline.usage.outputTokens, 3);
    await assert.rejects(generateText({ model: openai(MODEL), messages, maxOutputTokens: 3, maxRetries: 0 }), (e: unknown) => isRefusal(e, 'input.1') && /store = false/.test((e as APICallError).responseBody ?? ''));
  });

  test('aborting streamText frees the request in the engine', async () => {
    const before = baseline(server);
    const controller = new AbortController();
    const result = streamText({ model: openai(MODEL), prompt: 'a long story', maxOutputTokens: 1000, abortSignal: controller.signal, maxRetries: 0 });
    let parts = 0;
    try {
      for await (const _ of result.textStream) if (++parts === 5) controller.abort();
    } catch {
      // The SDK may surface the abort as an error; either way the request must be gone.
    }
    assert.ok(parts < 1000);
    await assertAbortFreed(server, before, 1000);
  });

  test('tools are a typed 400 unsupported_value naming tools', async () => {
    const weather = tool({ description: 'weather', inputSchema: jsonSchema<Record<string, never>>({ type: 'object', properties: {} }), execute: () => Promise.resolve('sunny') });
    await assert.rejects(generateText({ model: openai(MODEL), prompt: 'weather?', tools: { weather }, maxRetries: 0 }), (e: unknown) => isRefusal(e, 'tools'));
  });
});

describe('openai.chat: chat completions', () => {
  test('generateText with a stop sequence: the text ends before it', async () => {
    const { path, result: full } = await pathOf(() => generateText({ model: openai.chat(MODEL), prompt: 'tell me', maxOutputTokens: 20, seed: 4, maxRetries: 0 }));
    assert.equal(path, '/v1/chat/completions');
    assert.equal(full.finishReason, 'length');
    const stop = full.text.slice(8, 11);
    const stopped = await generateText({ model: openai.chat(MODEL), prompt: 'tell me', maxOutputTokens: 20, seed: 4, stopSequences: [stop], maxRetries: 0 });
    assert.equal(stopped.finishReason, 'stop');
    assert.equal(stopped.text, full.text.slice(0, full.text.indexOf(stop)));
  });

  test('streamText with usage', async () => {
    const result = streamText({ model: openai.chat(MODEL), prompt: 'hello', maxOutputTokens: 6, maxRetries: 0 });
    let text = '';
    for await (const t of result.textStream) text += t;
    assert.ok(text.length > 0);
    assert.equal((await result.usage).outputTokens, 6);
  });

  test('aborting a chat stream frees the request in the engine', async () => {
    const before = baseline(server);
    const controller = new AbortController();
    const result = streamText({ model: openai.chat(MODEL), prompt: 'a long story', maxOutputTokens: 1000, abortSignal: controller.signal, maxRetries: 0 });
    let parts = 0;
    try {
      for await (const _ of result.textStream) if (++parts === 5) controller.abort();
    } catch {
      // As above: an abort may surface as an error.
    }
    await assertAbortFreed(server, before, 1000);
  });

  test('tools are a typed 400 unsupported_value naming tools', async () => {
    const weather = tool({ description: 'weather', inputSchema: jsonSchema<Record<string, never>>({ type: 'object', properties: {} }), execute: () => Promise.resolve('sunny') });
    await assert.rejects(generateText({ model: openai.chat(MODEL), prompt: 'weather?', tools: { weather }, maxRetries: 0 }), (e: unknown) => isRefusal(e, 'tools'));
  });
});

// Structured output and logprobs: refused until the sampling branch implements them.
describe('structured output and logprobs (mock runner; the llama path is in structured-output.test.ts)', () => {
  const schema = jsonSchema<{ city: string }>({ type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false });

  test('Output.object on the mock runner (no grammar sampler) is refused by name: text.format on Responses, response_format on chat', async () => {
    for (const [model, param] of [[openai(MODEL), 'text.format'], [openai.chat(MODEL), 'response_format']] as const) {
      await assert.rejects(generateText({ model, prompt: 'a city', output: Output.object({ schema }), maxRetries: 0 }), (e: unknown) => isRefusal(e, param));
    }
  });

  test('logprobs come back through the provider metadata', async () => {
    const r = await generateText({ model: openai.chat(MODEL), prompt: 'x', maxOutputTokens: 4, providerOptions: { openai: { logprobs: 2 } }, maxRetries: 0 });
    const lp = (r.providerMetadata?.['openai'] as { logprobs?: { token: string; logprob: number; top_logprobs: unknown[] }[] } | undefined)?.logprobs;
    assert.ok(Array.isArray(lp) && lp.length > 0, `logprobs: ${JSON.stringify(r.providerMetadata)}`);
    for (const e of lp) {
      assert.ok(e.logprob <= 0);
      assert.equal(e.top_logprobs.length, 2);
    }
  });
});
