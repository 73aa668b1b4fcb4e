// The OpenAI-client tests every serving mode must pass: the unmodified openai npm client, streaming
// chat and completions, usage via include_usage, non-streamed responses, seeds, stop strings,
// /v1/models and typed errors. Engine mode runs them against Headroom (test/api/openai-client.test.ts),
// gateway mode against a gateway in front of Headroom (test/proxy/openai-client.test.ts).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import OpenAI from 'openai';

/** `client()` is called inside each test, after the caller's `before` has set it up. */
export function openAiClientTests(client: () => OpenAI, model: string): void {
  test('streams a chat completion and reads usage from the final chunk', async () => {
    const stream = await client().chat.completions.create({
      model,
      messages: [{ role: 'user', content: 'tell me about the river' }],
      max_tokens: 16,
      stream: true,
      stream_options: { include_usage: true },
      temperature: 0,
    });
    let text = '';
    let finish: string | null = null;
    let usage: OpenAI.CompletionUsage | null | undefined = null;
    let chunks = 0;
    for await (const chunk of stream) {
      chunks++;
      if (chunk.choices.length === 0) usage = chunk.usage;
      for (const c of chunk.choices) {
        text += c.delta.content ?? '';
        finish = c.finish_reason ?? finish;
      }
    }
    assert.ok(chunks > 2, `expected several chunks, got ${chunks}`);
    assert.ok(text.length > 0);
    assert.equal(finish, 'length');
    assert.ok(usage);
    assert.equal(usage.completion_tokens, 16);
    assert.ok(usage.prompt_tokens > 0);
    assert.equal(usage.total_tokens, usage.prompt_tokens + 16);
  });

  test('streams a completion with include_usage', async () => {
    const stream = await client().completions.create({ model, prompt: 'hello world', max_tokens: 7, stream: true, stream_options: { include_usage: true } });
    let text = '';
    let usage: OpenAI.CompletionUsage | undefined;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.text ?? '';
      if (chunk.usage) usage = chunk.usage;
    }
    assert.ok(text.length > 0);
    assert.equal(usage?.completion_tokens, 7);
  });

  test('non-streamed chat and completion parse, with usage and finish_reason', async () => {
    const chat = await client().chat.completions.create({ model, messages: [{ role: 'system', content: 'be brief' }, { role: 'user', content: 'hi' }], max_completion_tokens: 5 });
    assert.equal(chat.object, 'chat.completion');
    assert.equal(chat.choices[0]?.message.role, 'assistant');
    assert.ok((chat.choices[0]?.message.content ?? '').length > 0);
    assert.equal(chat.choices[0]?.finish_reason, 'length');
    assert.equal(chat.usage?.completion_tokens, 5);
    const cmpl = await client().completions.create({ model, prompt: 'once upon a time', max_tokens: 4, seed: 7, temperature: 0.8, top_p: 0.9 });
    assert.equal(cmpl.object, 'text_completion');
    assert.equal(cmpl.usage?.completion_tokens, 4);
    const models = await client().models.list();
    assert.deepEqual(models.data.map((m) => m.id), [model]);
  });

  test('the same seed gives the same text; a stop string ends with finish_reason stop', async () => {
    const a = await client().completions.create({ model, prompt: 'seeded', max_tokens: 20, seed: 42, temperature: 1 });
    const b = await client().completions.create({ model, prompt: 'seeded', max_tokens: 20, seed: 42, temperature: 1 });
    assert.equal(a.choices[0]?.text, b.choices[0]?.text);
    const full = a.choices[0]!.text;
    // Pick a stop string from the middle of the known output: generation must end right before it.
    const stop = full.slice(Math.floor(full.length / 2), Math.floor(full.length / 2) + 3);
    const c = await client().completions.create({ model, prompt: 'seeded', max_tokens: 20, seed: 42, temperature: 1, stop });
    assert.equal(c.choices[0]?.finish_reason, 'stop');
    assert.equal(c.choices[0]?.text, full.slice(0, full.indexOf(stop)));
  });

  test('refusals surface to the client as typed errors', async () => {
    await assert.rejects(client().chat.completions.create({ model: 'nope', messages: [{ role: 'user', content: 'x' }] }), (e: unknown) => {
      assert.ok(e instanceof OpenAI.NotFoundError);
      assert.equal((e.error as { code?: string }).code, 'model_not_found');
      return true;
    });
  });
}
