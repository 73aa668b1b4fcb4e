// LangChain's ChatOpenAI (`@langchain/openai`) against the real server (mock runner): invoke and
// stream with usage metadata, stop, n generations, aborts, the Responses API (useResponsesApi), and
// an unsupported field (bound tools) surfacing as a 400 that names it. LangChain sends its default
// sampling values (n, top_p, penalties at 0 on some paths): they must pass.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { HumanMessage } from '@langchain/core/messages';
import { ChatOpenAI } from '@langchain/openai';
import type { TestServer } from '../helpers/headroom.ts';
import { MODEL, assertAbortFreed, baseline, startClientServer } from './client-server.ts';

let server: TestServer;
before(async () => {
  server = await startClientServer();
});
after(() => server.close());

function chat(fields: ConstructorParameters<typeof ChatOpenAI>[0] = {}): ChatOpenAI {
  return new ChatOpenAI({ model: MODEL, apiKey: 'unused', maxRetries: 0, configuration: { baseURL: `${server.url}/v1` }, ...fields });
}

/** What these tests read of a LangChain message (its declared types leave usage_metadata undefined under this compiler's settings). */
interface Reply {
  readonly content: string | readonly { type: string; text?: string }[];
  readonly usage_metadata?: { readonly input_tokens: number; readonly output_tokens: number };
  readonly response_metadata: Record<string, unknown>;
}

function textOf(m: Reply): string {
  return typeof m.content === 'string' ? m.content : m.content.map((p) => p.text ?? '').join('');
}

/** LangChain rethrows the OpenAI client's error: status 400, and the server's code and param. */
function isRefusal(e: unknown, param: string): boolean {
  const err = e as { status?: number; code?: string; param?: string; message?: string };
  assert.equal(err.status, 400, String(err.message));
  assert.equal(err.code, 'unsupported_value');
  assert.equal(err.param, param);
  return true;
}

for (const useResponsesApi of [false, true]) {
  describe(useResponsesApi ? 'the Responses API (useResponsesApi)' : 'chat completions', () => {
    test('invoke: text and usage metadata', async () => {
      const r = (await chat({ maxTokens: 7, useResponsesApi }).invoke('tell me about the river')) as unknown as Reply;
      assert.ok(textOf(r).length > 0);
      assert.equal(r.usage_metadata?.output_tokens, 7);
      assert.ok((r.usage_metadata?.input_tokens ?? 0) > 0);
    });

    test('stream: chunks add up, with usage metadata', async () => {
      let text = '';
      let outputTokens: number | undefined;
      for await (const chunk of await chat({ maxTokens: 9, useResponsesApi }).stream('hello')) {
        const c = chunk as unknown as Reply;
        text += textOf(c);
        outputTokens = c.usage_metadata?.output_tokens ?? outputTokens;
      }
      assert.ok(text.length > 0);
      assert.equal(outputTokens, 9);
    });

    test('aborting a stream frees the request in the engine', async () => {
      const before = baseline(server);
      const controller = new AbortController();
      let chunks = 0;
      try {
        for await (const _ of await chat({ maxTokens: 1000, useResponsesApi }).stream('a long story', { signal: controller.signal })) if (++chunks === 5) controller.abort();
      } catch {
        // LangChain surfaces the abort as an error: the request must be gone either way.
      }
      assert.ok(chunks < 1000);
      await assertAbortFreed(server, before, 1000);
    });

    test('bound tools are a 400 unsupported_value naming tools', async () => {
      const model = chat({ maxTokens: 2, useResponsesApi }).bindTools([{ type: 'function', function: { name: 'weather', description: 'weather', parameters: { type: 'object', properties: {} } } }]);
      await assert.rejects(model.invoke('weather?'), (e: unknown) => isRefusal(e, 'tools'));
    });
  });
}

describe('chat completions only', () => {
  test('stop: the text ends before the stop string', async () => {
    const full = textOf((await chat({ maxTokens: 20, modelKwargs: { seed: 6 } }).invoke('tell me')) as unknown as Reply);
    const stop = full.slice(8, 11);
    const r = (await chat({ maxTokens: 20, modelKwargs: { seed: 6 } }).invoke('tell me', { stop: [stop] })) as unknown as Reply;
    assert.equal(textOf(r), full.slice(0, full.indexOf(stop)));
    assert.equal(r.response_metadata['finish_reason'], 'stop');
  });

  test('n: generate returns n generations', async () => {
    const r = await chat({ maxTokens: 5, n: 3, temperature: 1 }).generate([[new HumanMessage('hi')]]);
    assert.equal(r.generations[0]?.length, 3);
  });
});

// Structured output and logprobs: refused until the sampling branch implements them.
describe('structured output and logprobs (mock runner; the llama path is in structured-output.test.ts)', () => {
  test('withStructuredOutput (json_schema) is refused by name on the mock runner; logprobs come back in the response metadata', async () => {
    const schema = { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false };
    await assert.rejects(chat({ maxTokens: 5 }).withStructuredOutput(schema, { method: 'jsonSchema', name: 'city' }).invoke('a city'), (e: unknown) => isRefusal(e, 'response_format'));
    const r = await chat({ maxTokens: 4, logprobs: true, topLogprobs: 2 }).invoke('x');
    const content = (r.response_metadata['logprobs'] as { content?: { logprob: number; top_logprobs: unknown[] }[] } | undefined)?.content;
    assert.ok(Array.isArray(content) && content.length > 0, `logprobs: ${JSON.stringify(r.response_metadata)}`);
    for (const e of content) {
      assert.ok(e.logprob <= 0);
      assert.equal(e.top_logprobs.length, 2);
    }
  });
});
