// HEADROOM_LLAMA_LOG=1 passes all of llama.cpp's logs through to stderr (its load report, and with
// LLAMA_KV_CACHE_DEBUG the pool's occupancy at every step: how docs/per-token.md measured the
// attended range); without it only warnings and errors reach stderr.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const run = promisify(execFile);
const fixture = new URL('./fixture.ts', import.meta.url).href;
const script = `import { openTinyRunner } from ${JSON.stringify(fixture)}; const r = await openTinyRunner({ threads: 1, contextTokens: 1024 }); await r.close();`;
const root = fileURLToPath(new URL('../../../../', import.meta.url));

async function stderrOf(env: Record<string, string>): Promise<string> {
  const { stderr } = await run(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: root, env: { ...process.env, HEADROOM_LLAMA_LOG: '', ...env }, timeout: 120_000 });
  return stderr;
}

test('HEADROOM_LLAMA_LOG=1 lets llama.cpp log everything; by default its info lines are held back', async () => {
  const quiet = await stderrOf({});
  const loud = await stderrOf({ HEADROOM_LLAMA_LOG: '1' });
  assert.doesNotMatch(quiet, /llama_context:/, 'info lines are not printed by default');
  assert.match(loud, /llama_context:/, "llama.cpp's context report is printed with HEADROOM_LLAMA_LOG=1");
});
