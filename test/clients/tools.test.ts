// Tool calling through the three client libraries, on two real-vocabulary models (random weights
// around Qwen2's and Llama 3's vocabularies with their own chat templates): a forced call parses
// into the library's tool calls with arguments valid against the schema, streamed and not; the
// tool's result goes back and the next turn renders it in the template's format.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import { createOpenAI } from '@ai-sdk/openai';
import { generateText, jsonSchema, stepCountIs, streamText, tool } from 'ai';
import type { AIMessage} from '@langchain/core/messages';
import { HumanMessage, ToolMessage } from '@langchain/core/messages';
import { ChatOpenAI } from '@langchain/openai';
import { LlamaRunner } from '../../src/engine/runner/llama/llama-runner.ts';
import type { TestServer } from '../helpers/headroom.ts';
import { startTestServer } from '../helpers/headroom.ts';
import { realVocabModel } from '../helpers/real-vocab.ts';

const MODELS = [
  { vocab: 'qwen2', template: 'Qwen-Qwen2.5-7B-Instruct' },
  { vocab: 'llama-bpe', template: 'meta-llama-Llama-3.1-8B-Instruct' },
] as const;

const CITIES = ['Paris', 'Tokyo'];
const PARAMS: { type: 'object'; properties: Record<string, { type: 'string'; enum: string[] }>; required: string[]; additionalProperties: false } = { type: 'object', properties: { city: { type: 'string', enum: CITIES } }, required: ['city'], additionalProperties: false };

function validArgs(args: unknown): boolean {
  const a = (typeof args === 'string' ? JSON.parse(args) : args) as { city?: unknown };
  return CITIES.includes(String(a.city));
}

for (const m of MODELS) {
  describe(`${m.template} on the ${m.vocab} vocabulary`, () => {
    let server: TestServer;
    let runner: LlamaRunner;
    let model: string;
    const bodies: Record<string, unknown>[] = [];
    before(async () => {
      runner = new LlamaRunner({ modelPath: realVocabModel(m.vocab, m.template), threads: 1, maxSequences: 4, contextTokens: 2048 });
      server = await startTestServer({ runner });
      model = runner.info.modelId;
    });
    after(() => server.close());
    /** A fetch that keeps the JSON bodies the libraries send. */
    const recording: typeof fetch = async (input, init) => {
      if (typeof init?.body === 'string') bodies.push(JSON.parse(init.body) as Record<string, unknown>);
      return fetch(input, init);
    };

    test('openai: tools + tool_choice required, streamed and not, then the tool result', async () => {
      const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0 });
      const tools = [{ type: 'function' as const, function: { name: 'get_weather', description: 'The weather in a city', parameters: PARAMS } }];
      const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [{ role: 'user', content: 'Weather in Paris?' }];
      const r = await client.chat.completions.create({ model, messages, tools, tool_choice: 'required', parallel_tool_calls: false, max_tokens: 160, seed: 1 });
      const choice = r.choices[0]!;
      assert.equal(choice.finish_reason, 'tool_calls');
      const call = choice.message.tool_calls?.[0];
      assert.ok(call !== undefined && call.type === 'function');
      assert.equal(call.function.name, 'get_weather');
      assert.ok(validArgs(call.function.arguments), call.function.arguments);

      const stream = client.chat.completions.stream({ model, messages, tools, tool_choice: { type: 'function', function: { name: 'get_weather' } }, parallel_tool_calls: false, max_tokens: 160, seed: 2 });
      const done = await stream.finalChatCompletion();
      const streamed = done.choices[0]!.message.tool_calls?.[0];
      assert.ok(streamed !== undefined && streamed.type === 'function');
      assert.equal(streamed.function.name, 'get_weather');
      assert.ok(validArgs(streamed.function.arguments), streamed.function.arguments);

      // The result goes back: the next turn renders the call and its result.
      const next = await client.chat.completions.create({ model, tools, max_tokens: 4, messages: [...messages, choice.message, { role: 'tool', tool_call_id: call.id, content: '{"temp_c": 21}' }] });
      assert.ok(next.choices[0]!.message !== undefined);
    });

    test('the AI SDK: generateText with a tool (forced), then a second step with its result; streamText too', async () => {
      const openai = createOpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', fetch: recording });
      let executed: unknown = null;
      const getWeather = tool({
        description: 'The weather in a city',
        inputSchema: jsonSchema<{ city: string }>(PARAMS),
        execute: (input) => {
          executed = input;
          return Promise.resolve({ temp_c: 21 });
        },
      });
      const n = bodies.length;
      const result = await generateText({ model: openai.chat(model), prompt: 'Weather in Paris?', tools: { get_weather: getWeather }, toolChoice: 'required', maxOutputTokens: 160, seed: 3, maxRetries: 0, stopWhen: stepCountIs(2), providerOptions: { openai: { parallelToolCalls: false } } });
      const first = result.steps[0]!;
      assert.equal(first.finishReason, 'tool-calls');
      assert.equal(first.toolCalls[0]?.toolName, 'get_weather');
      assert.ok(validArgs(first.toolCalls[0]?.input));
      assert.deepEqual(executed, first.toolCalls[0]?.input);
      // The second request carried the call and its result back.
      const second = bodies.slice(n).find((b) => Array.isArray(b['messages']) && (b['messages'] as { role: string }[]).some((x) => x.role === 'tool'));
      assert.ok(second !== undefined, 'the SDK sent the tool result back');

      const s = streamText({ model: openai.chat(model), prompt: 'Weather in Tokyo?', tools: { get_weather: getWeather }, toolChoice: 'required', maxOutputTokens: 160, seed: 4, maxRetries: 0, providerOptions: { openai: { parallelToolCalls: false } } });
      const calls = await s.toolCalls;
      assert.equal(calls[0]?.toolName, 'get_weather');
      assert.ok(validArgs(calls[0]?.input));
    });

    test('the Responses API: openai responses.create with a function tool, and the AI SDK default provider over two steps', async () => {
      const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0 });
      const tools = [{ type: 'function' as const, name: 'get_weather', description: 'The weather in a city', parameters: PARAMS, strict: false }];
      const r = await client.responses.create({ model, input: 'Weather in Paris?', tools, tool_choice: 'required', parallel_tool_calls: false, max_output_tokens: 160 });
      const call = r.output.find((o) => o.type === 'function_call');
      assert.ok(call !== undefined && call.type === 'function_call', JSON.stringify(r.output));
      assert.equal(call.name, 'get_weather');
      assert.ok(validArgs(call.arguments), call.arguments);
      // The output goes back as a function_call_output item.
      const next = await client.responses.create({ model, tools, max_output_tokens: 4, input: [{ role: 'user', content: 'Weather in Paris?' }, { type: 'function_call', call_id: call.call_id, name: call.name, arguments: call.arguments }, { type: 'function_call_output', call_id: call.call_id, output: '{"temp_c": 21}' }] });
      assert.equal(next.status === 'completed' || next.status === 'incomplete', true);
      // Streamed: the SDK's events rebuild the call.
      const stream = client.responses.stream({ model, input: 'Weather in Tokyo?', tools, tool_choice: { type: 'function', name: 'get_weather' }, parallel_tool_calls: false, max_output_tokens: 160 });
      const final = await stream.finalResponse();
      const streamed = final.output.find((o) => o.type === 'function_call');
      assert.ok(streamed !== undefined && streamed.type === 'function_call');
      assert.ok(validArgs(streamed.arguments), streamed.arguments);

      const openai = createOpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', fetch: recording });
      const getWeather = tool({ description: 'The weather in a city', inputSchema: jsonSchema<{ city: string }>(PARAMS), execute: () => Promise.resolve({ temp_c: 21 }) });
      const result = await generateText({ model: openai(model), prompt: 'Weather in Paris?', tools: { get_weather: getWeather }, toolChoice: 'required', maxOutputTokens: 160, maxRetries: 0, stopWhen: stepCountIs(2), providerOptions: { openai: { store: false, parallelToolCalls: false } } });
      const first = result.steps[0]!;
      assert.equal(first.toolCalls[0]?.toolName, 'get_weather');
      assert.ok(validArgs(first.toolCalls[0]?.input));
      assert.equal(result.steps.length, 2, 'the SDK sent the result back for a second step');
    });

    test('LangChain: bindTools with a forced call, then a ToolMessage back', async () => {
      const chat = new ChatOpenAI({ model, apiKey: 'unused', maxRetries: 0, maxTokens: 160, configuration: { baseURL: `${server.url}/v1` } });
      const bound = chat.bindTools([{ type: 'function', function: { name: 'get_weather', description: 'The weather in a city', parameters: PARAMS } }], { tool_choice: 'required', parallel_tool_calls: false });
      const reply = (await bound.invoke([new HumanMessage('Weather in Paris?')])) as AIMessage;
      const call = reply.tool_calls?.[0];
      assert.equal(call?.name, 'get_weather');
      assert.ok(validArgs(call?.args));
      let streamed: AIMessage | undefined;
      for await (const chunk of await bound.stream([new HumanMessage('Weather in Tokyo?')])) streamed = streamed === undefined ? (chunk) : ((streamed as unknown as { concat(c: unknown): AIMessage }).concat(chunk));
      assert.equal(streamed?.tool_calls?.[0]?.name, 'get_weather');
      assert.ok(validArgs(streamed?.tool_calls?.[0]?.args));
      const next = await bound.invoke([new HumanMessage('Weather in Paris?'), reply, new ToolMessage({ tool_call_id: call.id!, content: '{"temp_c": 21}' })]);
      assert.ok(next !== undefined);
    });
  });
}
