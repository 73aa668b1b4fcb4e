// Builds llama.cpp's shared libraries (libllama, libggml, libggml-base, libggml-cpu) from the
// source checkout in native/vendor/llama.cpp, for this machine's CPU, into native/llama-build/.
// Called by build-native.mjs during `npm install`; the addon then links these instead of
// @node-llama-cpp/linux-x64's prebuilt ones.
//
// Why: on the same source, the prebuilt CPU variant prefilled at 3,600 tok/s where the native
// build did 5,900 (tiny model, 2 threads; bench/native/batched-bench.ts, docs/per-token.md).
//
// Choice (HEADROOM_LLAMA_BUILD): `source` builds and fails the install if it cannot; `prebuilt`
// never builds; `auto` (the default) builds when cmake and a C++ compiler are present and falls
// back to the prebuilt libraries, saying so, when they are not or the build fails.
//
// The build is skipped when native/llama-build/headroom-llama-stamp.json matches the commit and
// the flags below and the libraries are there. Offline: nothing is fetched (LLAMA_CURL, OpenSSL and
// every tool are off).
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** CMake flags of the build (part of its stamp: a change rebuilds). */
export const LLAMA_CMAKE_FLAGS = [
  '-DCMAKE_BUILD_TYPE=Release',
  '-DBUILD_SHARED_LIBS=ON',
  '-DGGML_NATIVE=ON',
  // ggml's own thread pool, which the addon makes persistent and whose polling it controls: an
  // OpenMP team in a Node process spins on its own terms (see docs/per-token.md for the measurement).
  '-DGGML_OPENMP=OFF',
  '-DGGML_BACKEND_DL=OFF',
  '-DLLAMA_CURL=OFF',
  '-DLLAMA_OPENSSL=OFF',
  '-DLLAMA_BUILD_COMMON=OFF',
  '-DLLAMA_BUILD_TESTS=OFF',
  '-DLLAMA_BUILD_TOOLS=OFF',
  '-DLLAMA_BUILD_EXAMPLES=OFF',
  '-DLLAMA_BUILD_SERVER=OFF',
  '-DLLAMA_BUILD_APP=OFF',
];

/** The libraries the addon links, as linker arguments for binding.gyp. */
export const SOURCE_LIBS = '-l:libllama.so -l:libggml.so -l:libggml-base.so';
export const PREBUILT_LIBS = '-l:libllama.v0.4.0.so -l:libggml.v0.4.0.so -l:libggml-base.so';

function have(cmd, args) {
  try {
    execFileSync(cmd, args, { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/**
 * Build (or reuse) the libraries. Returns the folder holding them, or null when `auto` fell back.
 * Throws when mode is `source` and the build is impossible or fails.
 */
export function buildLlama({ vendorDir, outDir, commit, mode, log }) {
  if (mode === 'prebuilt') return null;
  const stampPath = join(outDir, 'headroom-llama-stamp.json');
  const libDir = join(outDir, 'bin');
  const stamp = { commit, flags: LLAMA_CMAKE_FLAGS };
  const want = JSON.stringify(stamp);
  let built = '';
  try {
    const s = JSON.parse(readFileSync(stampPath, 'utf8'));
    built = JSON.stringify({ commit: s.commit, flags: s.flags });
  } catch {
    built = '';
  }
  if (built === want && existsSync(join(libDir, 'libllama.so'))) {
    log(`llama.cpp ${commit.slice(0, 12)} already built for this CPU in native/llama-build (HEADROOM_LLAMA_BUILD=prebuilt uses the prebuilt libraries)`);
    return libDir;
  }
  const missing = ['cmake', 'c++'].filter((c) => !have(c, ['--version']));
  if (missing.length > 0) {
    const why = `${missing.join(' and ')} not found`;
    if (mode === 'source') throw new Error(`HEADROOM_LLAMA_BUILD=source: cannot build llama.cpp: ${why}`);
    log(`${why}: using the prebuilt llama.cpp libraries (slower on long prompts; docs/per-token.md)`);
    return null;
  }
  const generator = have('ninja', ['--version']) ? ['-G', 'Ninja'] : [];
  const jobs = String(Math.max(1, Number(process.env.HEADROOM_LLAMA_JOBS) || 2));
  const t0 = Date.now();
  try {
    rmSync(outDir, { recursive: true, force: true });
    mkdirSync(outDir, { recursive: true });
    log(`building llama.cpp ${commit.slice(0, 12)} for this CPU into native/llama-build (a few minutes; HEADROOM_LLAMA_BUILD=prebuilt skips it)`);
    execFileSync('cmake', ['-S', vendorDir, '-B', outDir, ...generator, ...LLAMA_CMAKE_FLAGS], { stdio: ['ignore', 'ignore', 'inherit'] });
    execFileSync('cmake', ['--build', outDir, '-j', jobs, '--target', 'llama'], { stdio: ['ignore', 'ignore', 'inherit'] });
  } catch (e) {
    rmSync(outDir, { recursive: true, force: true });
    if (mode === 'source') throw e;
    log(`the llama.cpp build failed (${e.message.split('\n')[0]}): using the prebuilt libraries`);
    return null;
  }
  if (!existsSync(join(libDir, 'libllama.so'))) {
    if (mode === 'source') throw new Error(`llama.cpp built but ${join(libDir, 'libllama.so')} is missing`);
    log('the llama.cpp build produced no libllama.so: using the prebuilt libraries');
    return null;
  }
  writeFileSync(stampPath, `${JSON.stringify({ ...stamp, seconds: Math.round((Date.now() - t0) / 1000) }, null, 2)}\n`);
  log(`built llama.cpp in ${Math.round((Date.now() - t0) / 1000)} s`);
  return libDir;
}
