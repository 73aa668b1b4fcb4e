// Asking for the llama runner when the addon is not built is a clear error, not a silent fallback.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { LlamaRunner } from '../../../../src/engine/runner/llama/llama-runner.ts';
import { AddonNotBuiltError, loadLlamaAddon } from '../../../../src/engine/runner/llama/addon.ts';

const missing = join(tmpdir(), 'headroom-no-such-dir', 'headroom_llama.node');

test('the loader says the addon is not built and how to build it', () => {
  assert.throws(
    () => loadLlamaAddon(missing),
    (err: unknown) =>
      err instanceof AddonNotBuiltError &&
      err.code === 'llama_addon_not_built' &&
      err.message.includes('not built') &&
      err.message.includes(missing) &&
      err.message.includes('npm install'),
  );
});

test('constructing a LlamaRunner without the addon fails with the same error', () => {
  assert.throws(() => new LlamaRunner({ modelPath: 'models/tiny.gguf', addonPath: missing }), AddonNotBuiltError);
});
