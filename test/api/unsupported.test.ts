// Every OpenAI field the server does not implement is refused by name over real HTTP, on every
// endpoint the table lists it for, while the values client libraries send by default (and null)
// pass; ignored and unknown fields pass too. Driven by the table itself, so a new entry is tested
// the day it is added.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { request } from 'undici';
import type { Endpoint } from '../../src/api/unsupported.ts';
import { IGNORED, REFUSED } from '../../src/api/unsupported.ts';
import type { TestServer } from '../helpers/headroom.ts';
import { startTestServer } from '../helpers/headroom.ts';

const model = 'headroom-mock';
const PATHS: Record<Endpoint, string> = { chat: '/v1/chat/completions', completion: '/v1/completions', responses: '/v1/responses' };
const BASE: Record<Endpoint, Record<string, unknown>> = {
  chat: { model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 },
  completion: { model, prompt: 'hi', max_tokens: 2 },
  responses: { model, input: 'hi', max_output_tokens: 2 },
};
/** Values tried, in order, when the table needs one it refuses or one it accepts. */
const CANDIDATES: readonly unknown[] = [true, false, 0, -1, 1, 0.5, 2, '', 'none', 'auto', 'default', 'medium', 'disabled', 'high', [], ['text'], [1], {}, { type: 'text' }, { type: 'json_object' }, { effort: null }, { a: 1 }];

let server: TestServer;
before(async () => {
  server = await startTestServer();
});
after(() => server.close());

async function post(endpoint: Endpoint, body: Record<string, unknown>): Promise<{ status: number; error?: { type: string; code: string; param: string; message: string } }> {
  const res = await request(`${server.url}${PATHS[endpoint]}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const json = (await res.body.json()) as { error?: { type: string; code: string; param: string; message: string } };
  return { status: res.statusCode, ...(json.error === undefined ? {} : { error: json.error }) };
}

const cases = REFUSED.flatMap((r) => r.endpoints.map((endpoint) => ({ r, endpoint })));

test(`each of the ${REFUSED.length} refused fields is a 400 unsupported_value naming it, on each endpoint it applies to`, async () => {
  for (const { r, endpoint } of cases) {
    const value = CANDIDATES.find((v) => !r.accepts(v, BASE[endpoint]));
    assert.notEqual(value, undefined, `no candidate value is refused for ${r.field}`);
    const res = await post(endpoint, patch(BASE[endpoint], r.field, value));
    assert.equal(res.status, 400, `${endpoint} ${r.field}=${JSON.stringify(value)}`);
    assert.deepEqual([res.error?.type, res.error?.code, res.error?.param], ['invalid_request_error', 'unsupported_value', r.field], `${endpoint} ${r.field}`);
    assert.ok(res.error?.message.includes(`'${r.field}'`), res.error?.message);
  }
});

/**
 * The values clients send when they ask for nothing, written out here rather than read from the
 * table, so a table that refused one would fail. null stands for "only null asks for nothing".
 */
const NOTHING: Readonly<Record<string, unknown>> = {
  tools: [], tool_choice: 'auto', functions: [], function_call: 'none', audio: null, modalities: ['text'], prediction: null,
  web_search_options: null, reasoning_effort: null, verbosity: 'medium', reasoning: { effort: null, summary: null }, 'text.verbosity': 'medium',
  store: false, metadata: {}, previous_response_id: null, conversation: null, prompt: null, background: false, include: [],
  truncation: 'disabled', service_tier: 'auto', suffix: '', best_of: 1, echo: false, min_tokens: 0, stop_token_ids: [],
  include_stop_str_in_output: false, skip_special_tokens: true, use_beam_search: false, guided_json: null, guided_regex: null,
  guided_choice: null, guided_grammar: null, structured_outputs: null, chat_template: null, chat_template_kwargs: {},
  add_generation_prompt: true, continue_final_message: false, max_tool_calls: null,
  logprobs: false, top_logprobs: 0, presence_penalty: 0, frequency_penalty: 0, repetition_penalty: 1, top_k: -1, min_p: 0,
  logit_bias: {}, response_format: { type: 'text' }, 'text.format': { type: 'text' },
};

test('null, and the value that asks for nothing, pass for every refused field at once, with every ignored field and an unknown one', async () => {
  for (const endpoint of ['chat', 'completion', 'responses'] as const) {
    const mine = <F extends { endpoints: readonly Endpoint[] }>(fields: readonly F[]): F[] => fields.filter((f) => f.endpoints.includes(endpoint));
    let nulls: Record<string, unknown> = BASE[endpoint];
    let defaults: Record<string, unknown> = BASE[endpoint];
    for (const r of mine(REFUSED)) {
      assert.ok(r.field in NOTHING, `the test knows what asks for nothing in ${r.field}`);
      nulls = patch(nulls, r.field, null);
      // logprobs on /v1/completions is an integer: only null asks for nothing there.
      if (!(endpoint === 'completion' && r.field === 'logprobs')) defaults = patch(defaults, r.field, NOTHING[r.field]);
    }
    for (const f of mine(IGNORED)) defaults = patch(defaults, f.field, f.field.includes('.') ? true : 'x');
    if (endpoint !== 'responses') defaults = { ...defaults, stream: true, parallel_tool_calls: false };
    defaults = { ...defaults, some_vendor_extension: { anything: [1, 2] } };
    for (const body of [nulls, defaults]) {
      const res = await request(`${server.url}${PATHS[endpoint]}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
      const text = await res.body.text();
      assert.equal(res.statusCode, 200, `${endpoint} ${JSON.stringify(body)} => ${text}`);
    }
  }
});

/** Set a (possibly dotted) field on a copy of `body`. */
function patch(body: Record<string, unknown>, field: string, value: unknown): Record<string, unknown> {
  const out: Record<string, unknown> = structuredClone(body);
  const keys = field.split('.');
  let at = out;
  for (const k of keys.slice(0, -1)) at = (at[k] ??= {}) as Record<string, unknown>;
  at[keys.at(-1)!] = value;
  return out;
}

test('an image part in a chat message is a 400 that says images are not served, naming the part', async () => {
  const s = await startTestServer();
  try {
    const r = await fetch(`${s.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'headroom-mock', messages: [{ role: 'user', content: [{ type: 'text', text: 'what is this?' }, { type: 'image_url', image_url: { url: 'data:,' } }] }] }),
    });
    assert.equal(r.status, 400);
    const e = ((await r.json()) as { error: { code: string; param: string; message: string } }).error;
    assert.deepEqual([e.code, e.param], ['unsupported_value', 'messages.0.content.1']);
    assert.match(e.message, /"image_url" is not served: this server's model reads text only/);
  } finally {
    await s.close();
  }
});
