// What the llama.cpp addon depends on, as one hash (used by build-native.mjs to skip a rebuild):
// every file under native/src, binding.gyp, and the inputs the caller passes (the llama.cpp
// commit, the prebuilt library folder baked in as the rpath, node-addon-api's version, the Node
// ABI, the platform). Same inputs and same bytes give the same hash; any change gives another.
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

/** The stamp for `nativeDir` with `inputs` (a flat object of strings): { hash, ...inputs, files }. */
export function nativeStamp(nativeDir, inputs) {
  const sources = readdirSync(join(nativeDir, 'src'), { recursive: true }).map((f) => join('src', String(f)));
  const files = ['binding.gyp', ...sources].filter((f) => statSync(join(nativeDir, f), { throwIfNoEntry: false })?.isFile() === true).sort();
  const h = createHash('sha256');
  h.update(JSON.stringify(inputs));
  for (const f of files) h.update(`\0${f}\0`).update(readFileSync(join(nativeDir, f)));
  return { hash: h.digest('hex'), ...inputs, files };
}

/** The hash recorded at `path`, or null when there is none. */
export function readStampHash(path) {
  try {
    return JSON.parse(readFileSync(path, 'utf8')).hash ?? null;
  } catch {
    return null;
  }
}
