// POST /v1/responses over real HTTP (mock runner): the Response object and the streamed event
// sequence as OpenAI defines them, the same text a chat request with the same messages gets (it is
// prepared as one), Responses fields refused by name, errors naming Responses params, admission
// refusals and client aborts handled as on chat.
import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, test } from 'node:test';
import { request } from 'undici';
import type { AdmissionController } from '../../src/admission/controller.ts';
import { admitAll } from '../../src/admission/controller.ts';
import { refusal } from '../../src/backend/refusal.ts';
import { ApiError } from '../../src/api/errors.ts';
import { ResponsesFramer } from '../../src/api/responses-framer.ts';
import type { TestServer } from '../helpers/headroom.ts';
import { startTestServer, waitForIdle } from '../helpers/headroom.ts';

const model = 'headroom-mock';
let refuseAll = false;
/** Admits everything unless told to refuse (503 slo_unattainable with Retry-After 9). */
const gate: AdmissionController = {
  ...admitAll,
  name: 'test-gate',
  decide: (ctx, snapshot, features) => (refuseAll ? { admit: false, boundMs: 1, reason: 'over_budget', memo: null, refusal: refusal('conformal', { retryAfterS: 9 }) } : admitAll.decide(ctx, snapshot, features)),
};

let server: TestServer;
before(async () => {
  server = await startTestServer({ admission: gate, mock: { cost: { speed: 1 } } });
});
after(() => server.close());

async function post(path: string, body: unknown): Promise<{ status: number; headers: http.IncomingHttpHeaders; text: string }> {
  const res = await request(`${server.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: res.statusCode, headers: res.headers, text: await res.body.text() };
}

interface Event {
  readonly event: string;
  readonly data: { type: string; sequence_number: number; [k: string]: unknown };
}

function parseEvents(raw: string): Event[] {
  return raw.split('\n\n').filter((f) => f.length > 0).map((f) => {
    const m = /^event: (.+)\ndata: (.+)$/.exec(f);
    assert.ok(m, `every frame is an event line and a data line: ${JSON.stringify(f.slice(0, 80))}`);
    return { event: m[1]!, data: JSON.parse(m[2]!) as Event['data'] };
  });
}

type Response = { id: string; object: string; status: string; incomplete_details: { reason: string } | null; instructions: string | null; output: { id: string; type: string; role: string; status: string; content: { type: string; text: string }[] }[]; usage: { input_tokens: number; output_tokens: number; total_tokens: number }; store: boolean; metadata: Record<string, string> };

test('a non-streamed Response: one assistant message, incomplete at max_output_tokens, usage, and the text chat gets for the same messages', async () => {
  const r = await post('/v1/responses', { model, instructions: 'be brief', input: [{ role: 'user', content: [{ type: 'input_text', text: 'tell me' }] }], max_output_tokens: 6, temperature: 0, metadata: { run: 'a' } });
  assert.equal(r.status, 200, r.text);
  const res = JSON.parse(r.text) as Response;
  assert.equal(res.object, 'response');
  assert.match(res.id, /^resp/);
  assert.equal(res.status, 'incomplete');
  assert.deepEqual(res.incomplete_details, { reason: 'max_output_tokens' });
  assert.equal(res.instructions, 'be brief');
  assert.equal(res.store, false);
  assert.deepEqual(res.metadata, { run: 'a' });
  assert.equal(res.output.length, 1);
  const msg = res.output[0]!;
  assert.deepEqual([msg.type, msg.role, msg.status, msg.content.length, msg.content[0]!.type], ['message', 'assistant', 'incomplete', 1, 'output_text']);
  assert.equal(res.usage.output_tokens, 6);
  assert.equal(res.usage.total_tokens, res.usage.input_tokens + 6);
  // Instructions are the system message: the same prompt tokens and text as chat.
  const chat = JSON.parse((await post('/v1/chat/completions', { model, messages: [{ role: 'system', content: 'be brief' }, { role: 'user', content: 'tell me' }], max_tokens: 6, temperature: 0 })).text) as { choices: { message: { content: string } }[]; usage: { prompt_tokens: number } };
  assert.equal(msg.content[0]!.text, chat.choices[0]!.message.content);
  assert.equal(res.usage.input_tokens, chat.usage.prompt_tokens);
});

test('a streamed Response: the OpenAI event sequence, named events, consecutive sequence numbers, no [DONE]', async () => {
  const r = await post('/v1/responses', { model, input: 'once upon a time', max_output_tokens: 8, stream: true });
  assert.equal(r.status, 200);
  assert.ok(!r.text.includes('[DONE]'));
  const events = parseEvents(r.text);
  for (const [i, e] of events.entries()) {
    assert.equal(e.event, e.data.type, 'the event line names the data type');
    assert.equal(e.data.sequence_number, i);
  }
  const types = events.map((e) => e.data.type);
  const head = ['response.created', 'response.in_progress', 'response.output_item.added', 'response.content_part.added'];
  const tail = ['response.output_text.done', 'response.content_part.done', 'response.output_item.done', 'response.incomplete'];
  assert.deepEqual(types.slice(0, 4), head);
  assert.deepEqual(types.slice(-4), tail);
  const deltas = events.filter((e) => e.data.type === 'response.output_text.delta');
  assert.equal(deltas.length, types.length - 8, 'only deltas between the opening and the closing events');
  assert.ok(deltas.length > 0);
  const text = deltas.map((e) => e.data['delta'] as string).join('');
  assert.equal(events.at(-4)!.data['text'], text);
  const final = events.at(-1)!.data['response'] as Response;
  assert.equal(final.status, 'incomplete');
  assert.equal(final.output[0]!.content[0]!.text, text);
  assert.equal(final.usage.output_tokens, 8);
  const created = events[0]!.data['response'] as Response;
  assert.equal(created.status, 'in_progress');
  assert.equal(created.id, final.id);
  assert.equal((events[2]!.data['item'] as { id: string }).id, final.output[0]!.id);
});

test('a Response that ends at end-of-sequence is completed, whole and streamed', async () => {
  const eos = await startTestServer({ mock: { eosProbability: 1 } });
  try {
    const r = await request(`${eos.url}/v1/responses`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model, input: 'hi', max_output_tokens: 50 }) });
    const whole = (await r.body.json()) as Response;
    assert.equal(whole.status, 'completed');
    assert.equal(whole.incomplete_details, null);
    assert.equal(whole.output[0]!.status, 'completed');
    const res = await request(`${eos.url}/v1/responses`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model, input: 'hi', max_output_tokens: 50, stream: true }) });
    const events = parseEvents(await res.body.text());
    assert.equal(events.at(-1)!.event, 'response.completed');
    assert.equal((events.at(-1)!.data['response'] as Response).status, 'completed');
  } finally {
    await eos.close();
  }
});

test('a failure mid-stream is an error event with the catalog code, numbered like the rest (framing)', () => {
  const f = new ResponsesFramer('resp-1', 0, 'm', { instructions: null, maxOutputTokens: null, temperature: 1, topP: 1, metadata: {}, tools: [], toolChoice: 'none', parallelToolCalls: true, textFormat: { type: 'text' } });
  const opening = f.opening(1);
  const [failure] = f.failure(new ApiError('engine_failure', 'the engine stopped'));
  assert.equal(failure!.event, 'error');
  assert.deepEqual(failure!.data, { type: 'error', code: 'engine_failure', message: 'the engine stopped', param: null, sequence_number: opening.length });
});

const REFUSED: readonly [string, Record<string, unknown>, string][] = [
  // Function tools are served on the llama runner (test/clients/tools.test.ts); the mock has no chat template to carry them.
  ['tools on the mock', { tools: [{ type: 'function', name: 'f', parameters: {} }] }, 'tools'],
  ['previous_response_id', { previous_response_id: 'resp_1' }, 'previous_response_id'],
  ['store=true', { store: true }, 'store'],
  ['reasoning', { reasoning: { effort: 'high' } }, 'reasoning'],
  ['an image part', { input: [{ role: 'user', content: [{ type: 'input_text', text: 'a' }, { type: 'input_image', image_url: 'data:,' }] }] }, 'input.0.content.1'],
  ['max_tool_calls', { max_tool_calls: 3 }, 'max_tool_calls'],
  ['an item reference', { input: [{ type: 'item_reference', id: 'msg_1' }] }, 'input.0'],
];

test('Responses fields and input items this server cannot honour are a 400 unsupported_value naming them', async () => {
  for (const [name, extra, param] of REFUSED) {
    const r = await post('/v1/responses', { model, input: 'hi', max_output_tokens: 2, ...extra });
    assert.equal(r.status, 400, `${name}: ${r.text}`);
    const e = (JSON.parse(r.text) as { error: { type: string; code: string; param: string; message: string } }).error;
    assert.deepEqual([e.type, e.code, e.param], ['invalid_request_error', 'unsupported_value', param], name);
  }
  // The values that ask for nothing are accepted.
  const ok = await post('/v1/responses', { model, input: 'hi', max_output_tokens: 2, tools: [], tool_choice: 'auto', store: false, reasoning: { effort: null }, text: { format: { type: 'text' } }, truncation: 'disabled', parallel_tool_calls: true, user: 'u' });
  assert.equal(ok.status, 200, ok.text);
});

test('errors from preparing name the Responses field the client sent', async () => {
  const tooLong = await post('/v1/responses', { model, input: 'hi', max_output_tokens: 1_000_000 });
  assert.equal(tooLong.status, 400);
  assert.equal((JSON.parse(tooLong.text) as { error: { param: string } }).error.param, 'max_output_tokens');
  const badModel = await post('/v1/responses', { model: 'nope', input: 'hi' });
  assert.equal(badModel.status, 404);
  const missing = await post('/v1/responses', { model });
  assert.equal((JSON.parse(missing.text) as { error: { code: string; param: string } }).error.param, 'input');
});

test('an admission refusal is a 503 with Retry-After, as on chat', async () => {
  refuseAll = true;
  try {
    for (const stream of [false, true]) {
      const r = await post('/v1/responses', { model, input: 'hi', max_output_tokens: 2, stream });
      assert.equal(r.status, 503);
      assert.equal(r.headers['retry-after'], '9');
      assert.equal((JSON.parse(r.text) as { error: { code: string } }).error.code, 'slo_unattainable');
    }
  } finally {
    refuseAll = false;
  }
});

test('a client that leaves a streamed Response aborts it: the engine returns to idle with every block free', async () => {
  const before = server.headroom.engine.stats().scheduler;
  await new Promise<void>((resolve, reject) => {
    const req = http.request(`${server.url}/v1/responses`, { method: 'POST', headers: { 'content-type': 'application/json' } }, (res) => {
      let seen = '';
      res.on('data', (buf: Buffer) => {
        seen += buf.toString();
        if ((seen.match(/response\.output_text\.delta/g) ?? []).length >= 6) {
          req.destroy();
          resolve();
        }
      });
      res.on('end', () => reject(new Error('the stream ended before the client left')));
    });
    req.on('error', () => undefined);
    req.end(JSON.stringify({ model, input: 'a long story', max_output_tokens: 1000, ignore_eos: true, stream: true }));
  });
  await waitForIdle(server.headroom);
  const after = server.headroom.engine.stats();
  assert.equal(after.scheduler.kv.numFreeBlocks, before.kv.numFreeBlocks);
  assert.equal(after.scheduler.numFreeSeqIds, before.numFreeSeqIds);
  assert.ok(after.numSteps < 1000, `the engine stopped generating (${after.numSteps} steps)`);
});
