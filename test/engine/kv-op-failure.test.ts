// A runner failure part way through a plan's KV operations: the ops before it ran, the rest did
// not, so the scheduler's books (blocks, prefix cache, sequence ids) and the model's cells disagree.
// The engine stops loudly — every held request ends with engine_failure, /health turns 503, new work
// is refused, and no further step is run on those books — for a failure at every op position.
// A failure after all the ops ran (the forward pass) leaves books and cells in agreement: the
// step's requests fail and the engine keeps serving (test/engine/runner-failure.test.ts).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { request } from 'undici';
import type { RunnerPlan, StepResult } from '../../src/engine/plan.ts';
import { MockRunner } from '../../src/engine/runner/mock/mock-runner.ts';
import { startTestServer } from '../helpers/headroom.ts';

/** A mock runner that, once armed, applies the first `at` KV ops of the first plan with more than `at` and reports the next one failed. */
class PartialKvRunner extends MockRunner {
  armedAt: number | null = null;
  failed: { numOps: number; kinds: string } | null = null;
  stepsAfterFailure = 0;
  override async execute(plan: RunnerPlan): Promise<StepResult> {
    if (this.failed !== null) this.stepsAfterFailure++;
    const at = this.armedAt;
    if (at === null || plan.kvOps.length <= at) return super.execute(plan);
    this.armedAt = null;
    this.failed = { numOps: plan.kvOps.length, kinds: plan.kvOps.map((o) => o.kind).join(',') };
    const applied = await super.execute({ kvOps: plan.kvOps.slice(0, at), items: [] });
    assert.ok(applied.ok, 'the ops before the failure ran');
    return { ok: false, reason: 'kv_ops_failed', appliedKvOps: at, message: 'simulated llama_memory_seq_rm refusal' };
  }
}

// Parallel sampling over a shared prompt makes plans of 1 to 6 ops (copy, adopt, remove).
for (const at of [0, 1, 2, 3, 5]) {
  test(`a KV op that fails after ${at} of a plan's ops applied stops the engine loudly`, async () => {
    const runner = new PartialKvRunner({ cost: { speed: 0 } });
    let fatal: Error | null = null;
    const server = await startTestServer({ runner, scheduler: { scheduler: 'continuous' }, onEngineFailure: (error) => (fatal = error) });
    const errors = console.error;
    console.error = () => undefined; // the step-record dump is expected here
    try {
      runner.armedAt = at;
      const body = { model: 'headroom-mock', prompt: 'the same prompt for every one of them, long enough to fill a block or two of cells', max_tokens: 6, n: 3 };
      const post = (b: object) => request(`${server.url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(b) });
      const answers = await Promise.all(Array.from({ length: 3 }, async () => {
        const r = await post(body);
        return { status: r.statusCode, body: (await r.body.json()) as { error?: { code: string } } };
      }));
      assert.ok(runner.failed !== null, 'a plan with enough KV ops came');
      assert.ok(answers.some((a) => a.status === 500), 'the requests held when it failed end with an error');
      for (const a of answers) assert.ok(a.status === 200 || a.body.error?.code === 'engine_failure', JSON.stringify(a));
      assert.ok(fatal !== null, 'the failure listener ran');
      assert.match((fatal as Error).message, new RegExp(`applied ${at} of ${runner.failed.numOps} KV operations .*simulated llama_memory_seq_rm refusal; the scheduler's KV accounting no longer matches`));
      const health = await request(`${server.url}/health`);
      assert.equal(health.statusCode, 503);
      await health.body.text();
      const late = await post(body);
      assert.equal(late.statusCode, 503);
      assert.equal(((await late.body.json()) as { error: { code: string } }).error.code, 'engine_unavailable');
      assert.equal(runner.stepsAfterFailure, 0, 'no step ran on the books after the failure');
      assert.equal(server.headroom.engine.numUnfinished, 0);
    } finally {
      console.error = errors;
      await server.close();
    }
  });
}
