#!/usr/bin/env node
// Builds the llama.cpp addon (native/) during `npm install`, with no network:
// 1. clones llama.cpp from the git bundle node-llama-cpp ships (llama/gitRelease.bundle) into
//    native/vendor/llama.cpp, unless that checkout is already at the bundle's commit (only the
//    headers when HEADROOM_LLAMA_BUILD=prebuilt);
// 2. builds llama.cpp's libraries from that source for this CPU (scripts/build-llama.mjs;
//    HEADROOM_LLAMA_BUILD=auto|source|prebuilt), or uses the prebuilt libllama/libggml of
//    @node-llama-cpp/linux-x64 when it cannot;
// 3. runs node-gyp against Node's installed headers (--nodedir=/usr, or the prefix of the running
//    node): llama.cpp's chat code (common/chat.cpp, its Jinja engine and parsers) as a static
//    library, and the addon, linked to it and to the libraries of step 2.
// Set HEADROOM_SKIP_NATIVE=1 to skip (the mock runner still works; the llama runner then fails
// with a message saying the addon is not built).
//
// The build is skipped when nothing it depends on changed: native/build/headroom-stamp.json holds a
// hash of native/src/**, binding.gyp, the llama.cpp commit, the prebuilt libraries' folder (it is
// the addon's rpath), node-addon-api's version and the Node ABI; any difference rebuilds.
// HEADROOM_REBUILD_NATIVE=1 rebuilds regardless.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { nativeStamp, readStampHash } from './native-stamp.mjs';
import { buildLlama, PREBUILT_LIBS, SOURCE_LIBS } from './build-llama.mjs';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(join(root, 'package.json'));
const nativeDir = join(root, 'native');
const vendorDir = join(nativeDir, 'vendor', 'llama.cpp');

function log(msg) {
  process.stderr.write(`[build-native] ${msg}\n`);
}

function run(cmd, args, opts = {}) {
  return execFileSync(cmd, args, { stdio: ['ignore', 'pipe', 'inherit'], encoding: 'utf8', ...opts });
}

if (process.env.HEADROOM_SKIP_NATIVE === '1') {
  log('HEADROOM_SKIP_NATIVE=1: skipping the llama.cpp addon build');
  process.exit(0);
}
if (process.platform !== 'linux' || process.arch !== 'x64') {
  log(`the llama addon is built for linux-x64 only (this is ${process.platform}-${process.arch}); skipping`);
  process.exit(0);
}

// node-llama-cpp's "exports" hide package.json, so find its folder on the resolution paths.
function packageDir(name) {
  for (const base of require.resolve.paths(name) ?? []) {
    if (existsSync(join(base, name, 'package.json'))) return join(base, name);
  }
  throw new Error(`package ${name} is not installed (run npm install)`);
}

function optionalPackageDir(name) {
  try {
    return packageDir(name);
  } catch {
    return null;
  }
}

let haveCommit = '';
if (existsSync(join(vendorDir, '.git'))) {
  try {
    haveCommit = run('git', ['-C', vendorDir, 'rev-parse', 'HEAD']).trim();
  } catch {
    haveCommit = '';
  }
}
const haveHeaders = existsSync(join(vendorDir, 'include', 'llama.h')) && existsSync(join(vendorDir, 'common', 'chat.cpp'));
const haveSource = existsSync(join(vendorDir, 'CMakeLists.txt')) && existsSync(join(vendorDir, 'src', 'llama.cpp'));
const mode = process.env.HEADROOM_LLAMA_BUILD ?? 'auto';
if (!['auto', 'source', 'prebuilt'].includes(mode)) throw new Error(`HEADROOM_LLAMA_BUILD: expected auto, source or prebuilt, got ${mode}`);
const wantSource = mode !== 'prebuilt';

// node-llama-cpp is a dev dependency: it only carries the llama.cpp source bundle (the headers).
const llamaCppDir = optionalPackageDir('node-llama-cpp');
if (llamaCppDir === null && !haveHeaders) {
  log('node-llama-cpp (the llama.cpp source bundle, a dev dependency) is not installed and native/vendor has no headers: skipping the addon build (npm install without --omit=dev builds it)');
  process.exit(0);
}
const bundle = llamaCppDir === null ? null : join(llamaCppDir, 'llama', 'gitRelease.bundle');
if (bundle !== null && !existsSync(bundle)) throw new Error(`llama.cpp source bundle not found at ${bundle}`);
const wantCommit = bundle === null ? haveCommit : run('git', ['bundle', 'list-heads', bundle]).trim().split(/\s+/)[0];

if (bundle !== null && (haveCommit !== wantCommit || !haveHeaders || (wantSource && !haveSource))) {
  log(`cloning llama.cpp ${wantCommit?.slice(0, 12)} from ${bundle}`);
  rmSync(vendorDir, { recursive: true, force: true });
  mkdirSync(dirname(vendorDir), { recursive: true });
  run('git', ['-c', 'advice.detachedHead=false', 'clone', '--quiet', '--no-checkout', bundle, vendorDir]);
  // The prebuilt libraries need only the headers (include/, ggml/include/) and the chat code the
  // addon compiles itself (common/, vendor/): seconds, a few MB; a source build needs the tree.
  const paths = wantSource ? ['.'] : ['include', 'ggml/include', 'common', 'vendor'];
  run('git', ['-C', vendorDir, '-c', 'advice.detachedHead=false', 'checkout', '--quiet', wantCommit, '--', ...paths]);
  run('git', ['-C', vendorDir, 'update-ref', '--no-deref', 'HEAD', wantCommit]);
}

// Node's headers: prefer the running node's install prefix (/usr here), which has include/node.
const nodeDir = resolve(dirname(process.execPath), '..');
const nodedirArgs = existsSync(join(nodeDir, 'include', 'node', 'node_api.h')) ? [`--nodedir=${nodeDir}`] : [];
const gyp = require.resolve('node-gyp/bin/node-gyp.js');
const prebuiltDir = join(packageDir('@node-llama-cpp/linux-x64'), 'bins', 'linux-x64');
const sourceDir =
  wantSource && existsSync(join(vendorDir, 'CMakeLists.txt'))
    ? buildLlama({ vendorDir, outDir: join(nativeDir, 'llama-build'), commit: wantCommit, mode, log })
    : null;
if (wantSource && sourceDir === null && mode === 'source') throw new Error('HEADROOM_LLAMA_BUILD=source but there is no llama.cpp source to build');
const binsDir = sourceDir ?? prebuiltDir;
const libs = sourceDir === null ? PREBUILT_LIBS : SOURCE_LIBS;
if (sourceDir === null && !existsSync(join(binsDir, 'libllama.v0.4.0.so'))) throw new Error(`libllama not found in ${binsDir}`);

const addonPath = join(nativeDir, 'build', 'Release', 'headroom_llama.node');
const stampPath = join(nativeDir, 'build', 'headroom-stamp.json');
const stamp = nativeStamp(nativeDir, {
  llamaCommit: wantCommit,
  libDir: binsDir,
  libs,
  nodeAbi: process.versions.modules,
  nodeAddonApi: packageVersion('node-addon-api'),
  platform: `${process.platform}-${process.arch}`,
});
if (process.env.HEADROOM_REBUILD_NATIVE !== '1' && existsSync(addonPath) && readStampHash(stampPath) === stamp.hash) {
  log(`addon up to date (${stamp.hash.slice(0, 12)}: sources, binding.gyp, llama.cpp ${wantCommit?.slice(0, 12)}, Node ABI ${process.versions.modules}); HEADROOM_REBUILD_NATIVE=1 rebuilds`);
  process.exit(0);
}
rmSync(stampPath, { force: true });
log(`node-gyp rebuild ${nodedirArgs.join(' ')} -j2`);
execFileSync(process.execPath, [gyp, 'rebuild', ...nodedirArgs, '-j2'], {
  cwd: nativeDir,
  stdio: 'inherit',
  env: { ...process.env, HEADROOM_LLAMA_BINS: binsDir, HEADROOM_LLAMA_LIBS: libs, HEADROOM_LLAMA_COMMIT: wantCommit ?? 'unknown' },
});
writeFileSync(stampPath, `${JSON.stringify(stamp, null, 2)}\n`);
log(`built native/build/Release/headroom_llama.node, linked to ${sourceDir === null ? 'the prebuilt' : 'the source-built'} llama.cpp in ${binsDir}`);

function packageVersion(name) {
  return JSON.parse(readFileSync(join(packageDir(name), 'package.json'), 'utf8')).version;
}
