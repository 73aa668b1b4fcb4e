// Real models end to end over HTTP: random weights around real vocabularies and the models' own
// chat templates (llama.cpp's models/, test/helpers/real-vocab.ts), one server per family. Chat and
// streams, end-of-turn stops, forced tool calls (tool_choice required and named) that parse into
// tool_calls valid against the schema, streamed as delta.tool_calls, the tool result rendered
// back through the template, and each family's tool-call text parsed by its own format.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { LlamaRunner } from '../../src/engine/runner/llama/llama-runner.ts';
import type { ChatFormat } from '../../src/engine/tokenizer.ts';
import type { TestServer } from '../helpers/headroom.ts';
import { startTestServer } from '../helpers/headroom.ts';
import { realVocabModel } from '../helpers/real-vocab.ts';

interface Family {
  readonly vocab: string;
  readonly template: string;
  /** The end-of-turn token's text. */
  readonly endOfTurn: string;
  /** Forced calls on random weights: llama.cpp's grammar for this format spells the schema. */
  readonly forced: boolean;
  /** A tool call as the model writes it (null: the template has no tool format). */
  readonly callText: string | null;
  readonly kwargs?: Record<string, unknown>;
}

const FAMILIES: readonly Family[] = [
  { vocab: 'qwen2', template: 'Qwen-Qwen2.5-7B-Instruct', endOfTurn: '<|im_end|>', forced: true, callText: '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>' },
  { vocab: 'qwen2', template: 'Qwen-Qwen3-0.6B', endOfTurn: '<|im_end|>', forced: true, callText: '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>', kwargs: { enable_thinking: false } },
  { vocab: 'llama-bpe', template: 'meta-llama-Llama-3.1-8B-Instruct', endOfTurn: '<|eot_id|>', forced: true, callText: '{"name": "get_weather", "parameters": {"city": "Paris"}}' },
  { vocab: 'llama-spm', template: 'mistralai-Mistral-Nemo-Instruct-2407', endOfTurn: '</s>', forced: false, callText: '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "a1b2c3d4e"}]' },
  { vocab: 'gemma-4', template: 'google-gemma-4-31B-it', endOfTurn: '<turn|>', forced: false, callText: '<|tool_call>call:get_weather{city:<|"|>Paris<|"|>}<tool_call|>' },
  { vocab: 'phi-3', template: 'microsoft-Phi-3.5-mini-instruct', endOfTurn: '<|end|>', forced: false, callText: null },
];

/** The `data:` payloads of an SSE response, in order. */
async function readSse(r: Response): Promise<string[]> {
  const raw = await r.text();
  return raw.split('\n\n').filter((f) => f.startsWith('data: ')).map((f) => f.slice(6));
}

const CITIES = ['Paris', 'Tokyo'];
const TOOLS = [
  { type: 'function', function: { name: 'get_weather', description: 'The weather in a city', parameters: { type: 'object', properties: { city: { type: 'string', enum: CITIES } }, required: ['city'] } } },
  { type: 'function', function: { name: 'get_time', description: 'The time in a city', parameters: { type: 'object', properties: { city: { type: 'string', enum: CITIES } }, required: ['city'] } } },
];

interface Call {
  id: string;
  type: string;
  function: { name: string; arguments: string };
}

function assertValidCall(c: Call, names: readonly string[]): void {
  assert.equal(c.type, 'function');
  assert.ok(c.id.length > 0, 'a call id');
  assert.ok(names.includes(c.function.name), `name ${c.function.name}`);
  const args = JSON.parse(c.function.arguments) as { city?: unknown };
  assert.ok(CITIES.includes(String(args.city)), `arguments ${c.function.arguments} valid against the schema`);
}

for (const f of FAMILIES) {
  describe(`${f.template} on the ${f.vocab} vocabulary`, () => {
    let server: TestServer;
    let runner: LlamaRunner;
    let model: string;
    before(async () => {
      runner = new LlamaRunner({ modelPath: realVocabModel(f.vocab, f.template), threads: 1, maxSequences: 4, contextTokens: 2048 });
      server = await startTestServer({ runner });
      model = runner.info.modelId;
    });
    after(() => server.close());

    const post = async (body: Record<string, unknown>): Promise<Response> =>
      fetch(`${server.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model, ...(f.kwargs === undefined ? {} : { chat_template_kwargs: f.kwargs }), ...body }) });

    test("the GGUF's template is the one in use", () => {
      assert.equal(runner.info.details['chatTemplate'], 'gguf');
    });

    test('chat, streamed and not, and the end-of-turn token ends it', async () => {
      const r = await post({ messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hello!' }], max_tokens: 8, temperature: 0 });
      assert.equal(r.status, 200);
      const body = (await r.json()) as { choices: { message: { content: string }; finish_reason: string }[]; usage: { completion_tokens: number } };
      assert.equal(typeof body.choices[0]!.message.content, 'string');
      const s = await post({ messages: [{ role: 'user', content: 'Hello!' }], max_tokens: 8, temperature: 0, stream: true });
      assert.equal(s.status, 200);
      const events = await readSse(s);
      assert.ok(events.some((e) => e === '[DONE]'));
      // The end-of-turn token forced: the turn ends at once, finish_reason stop, nothing shown.
      const eot = runner.tokenizer.tokenize(f.endOfTurn, false);
      assert.equal(eot.length, 1, `${f.endOfTurn} is one token`);
      assert.ok(runner.tokenizer.isEog(eot[0]!), `${f.endOfTurn} ends generation`);
      const e = await post({ messages: [{ role: 'user', content: 'Hi' }], max_tokens: 8, logit_bias: { [eot[0]!]: 100 } });
      const eb = (await e.json()) as { choices: { message: { content: string }; finish_reason: string }[] };
      assert.deepEqual([eb.choices[0]!.finish_reason, eb.choices[0]!.message.content], ['stop', '']);
    });

    if (f.callText === null) {
      test('a template without a tool-call format: a forced call is a 400 that says so', async () => {
        const r = await post({ messages: [{ role: 'user', content: 'Weather?' }], tools: TOOLS, tool_choice: 'required', max_tokens: 8 });
        assert.equal(r.status, 400);
        assert.match(((await r.json()) as { error: { message: string } }).error.message, /no tool-call format/);
      });
      return;
    }

    test("the model's tool-call text parses into tool_calls by its own format", async () => {
      const encoded = await runner.tokenizer.encodeChat({ messages: [{ role: 'user', content: 'Weather in Paris?' }], tools: TOOLS.map((t) => t.function), toolChoice: 'auto', ...(f.kwargs === undefined ? {} : { templateKwargs: f.kwargs }) });
      assert.ok(encoded.ok && encoded.format !== undefined);
      const format: ChatFormat = encoded.format;
      assert.ok(format.parseToolCalls);
      const parsed = runner.tokenizer.openChatParser(format).update(f.callText!, true);
      assert.equal(parsed.error, undefined);
      assert.equal(parsed.toolCalls.length, 1, JSON.stringify(parsed));
      assert.equal(parsed.toolCalls[0]!.name, 'get_weather');
      assert.deepEqual(JSON.parse(parsed.toolCalls[0]!.arguments), { city: 'Paris' });
      // Fed in pieces, as a stream: the deltas rebuild the same call.
      const p = runner.tokenizer.openChatParser(format);
      let name = '';
      let args = '';
      const text = f.callText!;
      for (let i = 0; i < text.length; i += 5) {
        const last = i + 5 >= text.length;
        for (const d of p.update(text.slice(i, i + 5), last).deltas) {
          if (d.kind !== 'tool_call') continue;
          name += d.name ?? '';
          args += d.arguments;
        }
      }
      assert.equal(name, 'get_weather');
      assert.deepEqual(JSON.parse(args), { city: 'Paris' });
    });

    test('the tool result goes back and the next turn renders it in the template', async () => {
      const messages = [
        { role: 'user', content: 'Weather in Paris?' },
        { role: 'assistant', content: null, tool_calls: [{ id: 'a1b2c3d4e', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
        { role: 'tool', tool_call_id: 'a1b2c3d4e', content: '{"temp_c": 21}' },
      ];
      const r = await post({ messages, tools: TOOLS, max_tokens: 4, temperature: 0 });
      assert.equal(r.status, 200, await r.clone().text());
      const prompt = runner.tokenizer.applyChatTemplate([
        { role: 'user', content: 'Weather in Paris?' },
        { role: 'assistant', content: '', toolCalls: [{ id: 'a1b2c3d4e', name: 'get_weather', arguments: '{"city":"Paris"}' }] },
        { role: 'tool', content: '{"temp_c": 21}', toolCallId: 'a1b2c3d4e' },
      ]);
      assert.ok(prompt.includes('get_weather'), 'the call is rendered');
      assert.ok(prompt.includes('21'), 'the result is rendered');
    });

    if (!f.forced) return;

    for (const choice of ['required', 'named'] as const) {
      test(`tool_choice ${choice}: a call valid against the schema, streamed and not`, async () => {
        const tool_choice = choice === 'required' ? 'required' : { type: 'function', function: { name: 'get_time' } };
        const names = choice === 'required' ? ['get_weather', 'get_time'] : ['get_time'];
        const base = { messages: [{ role: 'user', content: 'Weather in Paris?' }], tools: TOOLS, tool_choice, parallel_tool_calls: false, max_tokens: 160, temperature: 1, seed: 5 };
        const r = await post(base);
        assert.equal(r.status, 200);
        const body = (await r.json()) as { choices: { message: { content: string | null; tool_calls?: Call[] }; finish_reason: string }[] };
        const c = body.choices[0]!;
        assert.equal(c.finish_reason, 'tool_calls', JSON.stringify(c));
        assert.equal(c.message.content, null);
        assert.ok((c.message.tool_calls?.length ?? 0) >= 1);
        for (const call of c.message.tool_calls!) assertValidCall(call, names);

        const s = await post({ ...base, stream: true });
        const chunks = (await readSse(s)).filter((e) => e !== '[DONE]').map((e) => JSON.parse(e) as { choices: { delta: { tool_calls?: { index: number; id?: string; type?: string; function: { name?: string; arguments: string } }[] }; finish_reason: string | null }[] });
        const calls: Call[] = [];
        let finish: string | null = null;
        for (const ch of chunks) {
          const d = ch.choices[0];
          if (d === undefined) continue;
          finish = d.finish_reason ?? finish;
          for (const t of d.delta.tool_calls ?? []) {
            calls[t.index] ??= { id: '', type: '', function: { name: '', arguments: '' } };
            const call = calls[t.index]!;
            call.id += t.id ?? '';
            call.type = t.type ?? call.type;
            call.function.name += t.function.name ?? '';
            call.function.arguments += t.function.arguments;
          }
        }
        assert.equal(finish, 'tool_calls');
        assert.ok(calls.length >= 1);
        for (const call of calls) assertValidCall(call, names);
        // The same seed: the stream carries the same calls as the whole response (ids aside).
        assert.deepEqual(calls.map((x) => x.function), c.message.tool_calls!.map((x) => x.function));
      });
    }
  });
}
