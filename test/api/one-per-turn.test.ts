// OnePerTurn: jobs run in order, one per turn of the event loop: a timer that is due when a job
// ends (the job arms it and then works past its delay) fires before the next job starts; without
// the gate, jobs queued together would run back to back and every timer after the last.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { OnePerTurn } from '../../src/api/one-per-turn.ts';

test('jobs run in order, and the event loop turns between any two', async () => {
  const gate = new OnePerTurn();
  const log: string[] = [];
  const done = new Promise<void>((resolve) => {
    for (let i = 0; i < 4; i++) {
      gate.run(() => {
        log.push(`job ${i}`);
        setTimeout(() => log.push(`timer after ${i}`), 1);
        const until = performance.now() + 3;
        while (performance.now() < until); // a synchronous job (a large body's parse) outlasting the timer's delay
        if (i === 3) setTimeout(resolve, 5);
      });
    }
  });
  assert.equal(gate.pending, 4);
  await done;
  assert.equal(gate.pending, 0);
  assert.deepEqual(log, ['job 0', 'timer after 0', 'job 1', 'timer after 1', 'job 2', 'timer after 2', 'job 3', 'timer after 3']);
});
