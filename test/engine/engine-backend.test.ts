// Engine mode's Backend turns a generation job into engine Requests: each choice carries the job's
// budgets (the E2E deadline and the TPOT budget the step budget holds steps to).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { EngineBackend } from '../../src/backend/engine-backend.ts';
import type { GenerationJob } from '../../src/backend/backend.ts';
import type { Engine } from '../../src/engine/engine.ts';
import type { Request } from '../../src/engine/request.ts';
import { MockTokenizer } from '../../src/engine/runner/mock/mock-tokenizer.ts';

function backendCapturing(): { backend: EngineBackend; submitted: Request[] } {
  const submitted: Request[] = [];
  const tokenizer = new MockTokenizer();
  const engine = {
    runner: { tokenizer, info: { modelId: 'mock', contextTokens: 4096 } },
    submit: (req: Request) => (submitted.push(req), { ok: true }),
    abort: () => undefined,
  } as unknown as Engine;
  return { backend: new EngineBackend(engine, { nowMs: () => 0 }), submitted };
}

const job = (extra: Partial<GenerationJob>): GenerationJob => ({
  id: 'cmpl-1',
  promptTokens: [1, 2, 3],
  maxTokens: 8,
  sampling: { temperature: 0, topP: 1, seed: 1 },
  ignoreEos: true,
  n: 2,
  arrivalMs: 100,
  sloMs: 900,
  ...extra,
});

test('every choice of a job carries its deadline and its TPOT budget; a job without one gives none', () => {
  const { backend, submitted } = backendCapturing();
  assert.equal(backend.generate(job({ tpotMs: 12 }), new AbortController().signal).ok, true);
  assert.deepEqual(
    submitted.map((r) => [r.id, r.deadlineMs, r.tpotMs]),
    [
      ['cmpl-1.0', 1000, 12],
      ['cmpl-1.1', 1000, 12],
    ],
  );
  backend.generate(job({ id: 'cmpl-2', n: 1 }), new AbortController().signal);
  assert.equal(submitted.at(-1)!.tpotMs, null);
  backend.generate(job({ id: 'cmpl-3', n: 1, tpotMs: null }), new AbortController().signal);
  assert.equal(submitted.at(-1)!.tpotMs, null);
});
