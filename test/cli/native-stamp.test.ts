// The addon's rebuild stamp (scripts/native-stamp.mjs): `npm install` skips the native build only
// while the hash is unchanged, so the hash must change with every input the addon depends on —
// a source byte, a new source file, binding.gyp, the llama.cpp commit, the Node ABI — and stay
// the same when nothing changed.
import assert from 'node:assert/strict';
import { appendFileSync, cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { nativeStamp, readStampHash } from '../../scripts/native-stamp.mjs';

const INPUTS = { llamaCommit: 'abc', libDir: '/libs', nodeAbi: '115', nodeAddonApi: '8.9.2', platform: 'linux-x64' };

test('the stamp hash is stable for the same tree and changes with each input', () => {
  const dir = mkdtempSync(join(tmpdir(), 'headroom-stamp-'));
  try {
    cpSync('native/src', join(dir, 'src'), { recursive: true });
    cpSync('native/binding.gyp', join(dir, 'binding.gyp'));
    const base = nativeStamp(dir, INPUTS);
    assert.equal(nativeStamp(dir, INPUTS).hash, base.hash, 'same tree, same hash');
    assert.ok(base.files.includes('binding.gyp') && base.files.includes(join('src', 'context.cpp')), base.files.join(', '));
    const seen = new Set([base.hash]);
    const differs = (what: string, hash: string): void => {
      assert.ok(!seen.has(hash), `${what} did not change the hash`);
      seen.add(hash);
    };
    differs('the Node ABI', nativeStamp(dir, { ...INPUTS, nodeAbi: '127' }).hash);
    differs('the llama.cpp commit', nativeStamp(dir, { ...INPUTS, llamaCommit: 'def' }).hash);
    differs('the library folder', nativeStamp(dir, { ...INPUTS, libDir: '/elsewhere' }).hash);
    appendFileSync(join(dir, 'src', 'context.cpp'), '\n');
    differs('a source byte', nativeStamp(dir, INPUTS).hash);
    writeFileSync(join(dir, 'src', 'extra.h'), '#pragma once\n');
    differs('a new source file', nativeStamp(dir, INPUTS).hash);
    appendFileSync(join(dir, 'binding.gyp'), ' ');
    differs('binding.gyp', nativeStamp(dir, INPUTS).hash);

    const stampFile = join(dir, 'stamp.json');
    assert.equal(readStampHash(stampFile), null, 'no stamp file: no hash (rebuild)');
    writeFileSync(stampFile, JSON.stringify(base));
    assert.equal(readStampHash(stampFile), base.hash);
    writeFileSync(stampFile, '{not json');
    assert.equal(readStampHash(stampFile), null, 'a corrupt stamp: no hash (rebuild)');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
