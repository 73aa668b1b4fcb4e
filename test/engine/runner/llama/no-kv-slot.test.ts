// A batch llama.cpp cannot place (return 1: no KV slot) is an expected condition: the runner
// resolves { ok: false, reason: 'no_kv_slot' }, never throws or crashes, and keeps working.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { asSeqId } from '../../../../src/engine/plan.ts';
import { item, openTinyRunner, plan, promptOf, run } from './fixture.ts';

test('a batch with no KV slot resolves as no_kv_slot and the runner keeps working', async () => {
  const runner = await openTinyRunner({ contextTokens: 256, maxBatchTokens: 256 });
  try {
    assert.equal(runner.info.contextTokens, 256);
    const p = promptOf(runner, 200);
    await run(runner, plan([item(0, p, 0)]));
    const refused = await runner.execute(plan([item(1, p.slice(0, 100), 0)]));
    assert.equal(refused.ok, false);
    assert.ok(!refused.ok && refused.reason === 'no_kv_slot', `expected no_kv_slot, got ${JSON.stringify(refused)}`);
    // Free seq 0's cells; the same batch now fits.
    const ok = await runner.execute(plan([item(1, p.slice(0, 100), 0)], [{ kind: 'remove', seqId: asSeqId(0), p0: 0, p1: -1 }]));
    assert.equal(ok.ok, true);
  } finally {
    await runner.close();
  }
});
