// The API against a fake Backend — no engine, no scheduler, no runner: proof that the front door
// talks only to the Backend seam. The fake scripts its token events per choice and records what
// the API asked of it (jobs, aborts, stopped choices).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import http from 'node:http';
import { request } from 'undici';
import { ActiveRequests } from '../../src/api/active-requests.ts';
import { serverConfig } from '../../src/api/config.ts';
import { ConnectionGuard } from '../../src/api/connections.ts';
import { sequentialIds } from '../../src/api/ids.ts';
import { buildServer } from '../../src/api/server.ts';
import type { Backend, BackendHealth, GenerateResult, Generation, GenerationEvent, GenerationJob } from '../../src/backend/backend.ts';
import { EventQueue } from '../../src/backend/event-queue.ts';
import { refusal } from '../../src/backend/refusal.ts';
import type { RequestTimeline } from '../../src/engine/outputs.ts';
import { MockTokenizer } from '../../src/engine/runner/mock/mock-tokenizer.ts';
import { streamCompletion } from '../helpers/sse.ts';

const tokenizer = new MockTokenizer();

class FakeBackend implements Backend {
  readonly info = { mode: 'engine' as const, modelId: 'fake', contextTokens: 4096 };
  readonly tokenizer = tokenizer;
  readonly clock = { nowMs: () => 1000 };
  readonly jobs: GenerationJob[] = [];
  readonly stopped: number[] = [];
  numAborts = 0;
  health_: BackendHealth = { ok: true, draining: false, failure: null };
  refuseNext = false;
  /** Per choice: the text it generates, one token per event, then `length`. */
  script: string[] = ['hello world'];
  /** Keep the stream open after the script (for the disconnect test). */
  hang = false;

  health(): BackendHealth {
    return this.health_;
  }

  stats(): Record<string, unknown> {
    return { fake: true };
  }

  numSnapshots = 0;

  snapshot(): null {
    this.numSnapshots++;
    return null;
  }

  peekCachedTokens(): number {
    return 0;
  }

  generate(job: GenerationJob, signal: AbortSignal): GenerateResult {
    this.jobs.push(job);
    if (this.refuseNext) {
      this.refuseNext = false;
      return { ok: false, refusal: refusal('conformal', { retryAfterS: 7 }) };
    }
    const q = new EventQueue<GenerationEvent>();
    const timeline = (i: number, n: number): RequestTimeline => ({ requestId: `${job.id}.${i}`, arrivalMs: job.arrivalMs, deadlineMs: job.arrivalMs + job.sloMs, scheduledMs: 1001, firstTokenMs: 1002, finishedMs: 1003, numPromptTokens: job.promptTokens.length, maxTokens: job.maxTokens, numCachedTokens: 0, numOutputTokens: n, numPreemptions: 0, outcome: 'length' });
    let open = job.n;
    const finish = (i: number, reason: 'length' | 'stop' | 'abort', n: number): void => {
      q.push({ type: 'finish', index: i, reason, message: null, timeline: timeline(i, n) });
      if (--open === 0) q.end();
    };
    const done = new Set<number>();
    const end = (i: number, reason: 'length' | 'stop' | 'abort', n: number): void => {
      if (done.has(i)) return;
      done.add(i);
      finish(i, reason, n);
    };
    signal.addEventListener('abort', () => {
      this.numAborts++;
      for (let i = 0; i < job.n; i++) end(i, 'abort', 0);
    });
    setImmediate(() => {
      for (let i = 0; i < job.n; i++) {
        const ids = tokenizer.tokenize(this.script[i % this.script.length]!, false);
        for (const t of ids) if (!done.has(i)) q.push({ type: 'tokens', index: i, tokenIds: [t] });
        if (!this.hang) end(i, 'length', ids.length);
      }
    });
    const gen: Generation = {
      [Symbol.asyncIterator]: () => q[Symbol.asyncIterator](),
      stopChoice: (i) => {
        this.stopped.push(i);
        end(i, 'stop', 0);
      },
    };
    return { ok: true, generation: gen };
  }
}

const backend = new FakeBackend();
let url = '';
const app = buildServer({ backend: () => backend, config: serverConfig({ host: '127.0.0.1', port: 0 }), lifecycle: { warm: true }, active: new ActiveRequests(), connections: new ConnectionGuard({ maxConnections: 64, maxConnectionsPerAddress: 64 }), ids: sequentialIds() });
before(async () => {
  url = await app.listen({ host: '127.0.0.1', port: 0 });
});
after(() => app.close());

const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
  request(`${url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });

test('a prepared job reaches the backend: tokens, limits, budget, sampling, n', async () => {
  backend.script = ['hello world'];
  const res = await post('/v1/completions', { model: 'fake', prompt: 'the queue', max_tokens: 9, temperature: 0, seed: 5, n: 2 }, { 'x-slo-ms': '2500' });
  const body = (await res.body.json()) as { id: string; choices: { index: number; text: string; finish_reason: string }[]; usage: { prompt_tokens: number; completion_tokens: number } };
  assert.equal(res.statusCode, 200);
  const job = backend.jobs.at(-1)!;
  assert.deepEqual(job.promptTokens, tokenizer.tokenize('the queue', true));
  assert.equal(job.maxTokens, 9);
  assert.equal(job.sloMs, 2500);
  assert.equal(job.n, 2);
  assert.deepEqual(job.sampling, { temperature: 0, topP: 1, seed: 5 });
  assert.equal(job.arrivalMs, 1000, 'arrival comes from the backend clock');
  assert.match(body.id, /^cmpl-\d{8}$/, 'ids come from the injected id source');
  assert.equal(backend.numSnapshots, 0, 'admission off and no trace: no engine snapshot is built per request');
  assert.deepEqual(body.choices.map((c) => [c.index, c.text, c.finish_reason]), [[0, 'hello world', 'length'], [1, 'hello world', 'length']]);
  assert.equal(body.usage.prompt_tokens, job.promptTokens.length);
  assert.equal(body.usage.completion_tokens, 2 * tokenizer.tokenize('hello world', false).length);
});

test('the TPOT budget header reaches the backend with the job, and bounds its E2E budget; without it the job has none', async () => {
  backend.script = ['hi'];
  const res = await post('/v1/completions', { model: 'fake', prompt: 'the queue', max_tokens: 10 }, { 'x-slo-tpot-ms': '12', 'x-slo-ttft-ms': '400' });
  await res.body.dump();
  assert.equal(res.statusCode, 200);
  assert.equal(backend.jobs.at(-1)!.tpotMs, 12);
  assert.equal(backend.jobs.at(-1)!.sloMs, 400 + 10 * 12);
  const plain = await post('/v1/completions', { model: 'fake', prompt: 'the queue', max_tokens: 10 });
  await plain.body.dump();
  assert.equal(backend.jobs.at(-1)!.tpotMs ?? null, null);
  const bad = await post('/v1/completions', { model: 'fake', prompt: 'the queue', max_tokens: 10 }, { 'x-slo-tpot-ms': 'soon' });
  assert.equal(bad.statusCode, 400);
  assert.match(((await bad.body.json()) as { error: { message: string } }).error.message, /x-slo-tpot-ms/);
});

test('a stop string ends its choice in the API and tells the backend to stop that choice only', async () => {
  backend.script = ['hello world stream', 'the river and the stone'];
  backend.stopped.length = 0;
  const s = await streamCompletion(url, { model: 'fake', messages: [{ role: 'user', content: 'x' }], n: 2, stream: true, stop: [' world'] }, '/v1/chat/completions');
  assert.equal(s.status, 200);
  assert.ok(s.sawDone);
  const byChoice = new Map<number, { text: string; finish: string | null }>();
  for (const c of s.chunks) {
    for (const ch of c.choices as { index: number; delta?: { content?: string }; finish_reason: string | null }[]) {
      const e = byChoice.get(ch.index) ?? { text: '', finish: null };
      e.text += ch.delta?.content ?? '';
      e.finish = ch.finish_reason ?? e.finish;
      byChoice.set(ch.index, e);
    }
  }
  assert.deepEqual(byChoice.get(0), { text: 'hello', finish: 'stop' });
  assert.deepEqual(byChoice.get(1), { text: 'the river and the stone', finish: 'length' });
  assert.deepEqual(backend.stopped, [0]);
});

test('a backend refusal becomes its catalog error: 503 slo_unattainable with Retry-After', async () => {
  backend.refuseNext = true;
  const res = await post('/v1/completions', { model: 'fake', prompt: 'x', max_tokens: 3 });
  const body = (await res.body.json()) as { error: { code: string; type: string } };
  assert.equal(res.statusCode, 503);
  assert.equal(body.error.code, 'slo_unattainable');
  assert.equal(body.error.type, 'overloaded_error');
  assert.equal(res.headers['retry-after'], '7');
});

test('a client that hangs up aborts the generation through the one AbortController', async () => {
  backend.script = ['hello'];
  backend.hang = true;
  const before = backend.numAborts;
  await new Promise<void>((resolve) => {
    const req = http.request(`${url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' } }, (res) => {
      res.once('data', () => {
        req.destroy();
        resolve();
      });
    });
    req.on('error', () => undefined);
    req.end(JSON.stringify({ model: 'fake', prompt: 'x', max_tokens: 3, stream: true }));
  });
  const t0 = Date.now();
  while (backend.numAborts === before && Date.now() - t0 < 5000) await new Promise((r) => setTimeout(r, 5));
  backend.hang = false;
  assert.equal(backend.numAborts, before + 1);
});

test('/health and /ready read the backend', async () => {
  backend.health_ = { ok: false, draining: false, failure: 'boom' };
  const h = await request(`${url}/health`);
  assert.equal(h.statusCode, 503);
  assert.deepEqual(await h.body.json(), { status: 'failed', loading: false, draining: false, failure: 'boom' });
  assert.equal((await request(`${url}/ready`)).statusCode, 503);
  backend.health_ = { ok: true, draining: false, failure: null };
  assert.equal((await request(`${url}/health`)).statusCode, 200);
  assert.equal((await request(`${url}/ready`)).statusCode, 200);
  const stats = (await (await request(`${url}/stats`)).body.json()) as { mode: string; fake: boolean };
  assert.equal(stats.mode, 'engine');
  assert.equal(stats.fake, true);
});
