// The start-up warning for an SLO shorter than the longest output the server allows takes alone
// (src/app.ts capOutputWarning): the arithmetic, and the line a real start writes from its warm-up.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { capOutputWarning } from '../../src/app.ts';
import { startOpsServer } from './ops-server.ts';

test('the warning names the cap, its time alone and the SLO, only when the cap alone is past the SLO', () => {
  const line = capOutputWarning(1024, 5, 4000);
  assert.ok(line !== null);
  assert.match(line, /1024 tokens\) takes about 5\.1 s alone/);
  assert.match(line, /\(5\.0 ms\), past the 4\.0 s SLO/);
  assert.equal(capOutputWarning(512, 5, 4000), null, '2.6 s fits a 4 s budget');
  assert.equal(capOutputWarning(800, 5, 4000), null, 'exactly the budget is not past it');
  assert.equal(capOutputWarning(1024, Number.NaN, 4000), null, 'no measurement, no warning');
});

const warnings = (lines: Record<string, unknown>[]): string[] =>
  lines.filter((l) => l['level'] === 'warn' && typeof l['msg'] === 'string' && l['msg'].includes('--max-output-tokens')).map((l) => l['msg'] as string);

test('a server whose cap cannot fit its SLO says so once at start; one whose cap fits does not', async () => {
  // The mock's batch-1 step at speed 1 is 2.5 ms (or more: timers): 1,024 tokens take ≥ 2.5 s.
  const tight = await startOpsServer({ server: { sloMs: 500, maxOutputTokens: 1024 }, mock: { cost: { speed: 1 } } });
  try {
    const said = warnings(tight.lines());
    assert.equal(said.length, 1, `one warning, got ${JSON.stringify(said)}`);
    assert.match(said[0]!, /past the 0\.5 s SLO/);
  } finally {
    await tight.close();
  }
  const roomy = await startOpsServer({ server: { sloMs: 600_000, maxOutputTokens: 1024 }, mock: { cost: { speed: 1 } } });
  try {
    assert.deepEqual(warnings(roomy.lines()), []);
  } finally {
    await roomy.close();
  }
});
