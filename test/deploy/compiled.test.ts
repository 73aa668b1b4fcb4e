// The image runs compiled JavaScript, not TypeScript through tsx (Dockerfile, tsconfig.build.json):
// `npm run build`'s output, laid out as the runtime stage lays it out (src/ compiled, bin/, the
// addon, the model, package.json, node_modules without tsx, so a path that still needed tsx fails
// here), answers --help, serves a chat completion on the llama runner (the addon and the default
// model found relative to the compiled modules) and trains in its worker thread.
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { request } from 'undici';

const REPO = process.cwd();

/** The runtime stage's /app, from this checkout: compiled src/, and everything else linked. */
function assemble(): string {
  const app = mkdtempSync(path.join(os.tmpdir(), 'hr-compiled-'));
  execFileSync(process.execPath, [path.join(REPO, 'node_modules/typescript/bin/tsc'), '-p', path.join(REPO, 'tsconfig.build.json'), '--outDir', app], { stdio: 'pipe' });
  cpSync(path.join(REPO, 'src/admission/self-train/worker-entry.mjs'), path.join(app, 'src/admission/self-train/worker-entry.mjs'));
  cpSync(path.join(REPO, 'bin'), path.join(app, 'bin'), { recursive: true });
  cpSync(path.join(REPO, 'package.json'), path.join(app, 'package.json'));
  symlinkSync(path.join(REPO, 'models'), path.join(app, 'models'));
  mkdirSync(path.join(app, 'native/build'), { recursive: true });
  symlinkSync(path.join(REPO, 'native/build/Release'), path.join(app, 'native/build/Release'));
  if (existsSync(path.join(REPO, 'native/llama-build'))) symlinkSync(path.join(REPO, 'native/llama-build'), path.join(app, 'native/llama-build'));
  mkdirSync(path.join(app, 'node_modules'));
  for (const name of readdirSync(path.join(REPO, 'node_modules'))) {
    if (name === 'tsx' || name === '.bin') continue;
    symlinkSync(path.join(REPO, 'node_modules', name), path.join(app, 'node_modules', name));
  }
  return app;
}

test('compiled JavaScript: --help, and a served chat completion on the llama runner, with no tsx installed', { timeout: 600_000 }, async () => {
  const app = assemble();
  try {
    assert.ok(existsSync(path.join(app, 'src/cli/main.js')) && !existsSync(path.join(app, 'src/cli/main.ts')));
    const help = execFileSync(process.execPath, [path.join(app, 'bin/headroom.mjs'), '--help'], { encoding: 'utf8' });
    assert.match(help, /Usage: headroom/);

    // The default model and the addon are found relative to the compiled modules (app/models, app/native).
    const proc = spawn(process.execPath, [path.join(app, 'bin/headroom.mjs'), 'serve', '--host', '127.0.0.1', '--port', '0', '--threads', '1'], { cwd: app, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    proc.stdout.on('data', (b: Buffer) => (out += b.toString()));
    proc.stderr.on('data', (b: Buffer) => (out += b.toString()));
    const exited = new Promise<number | null>((resolve) => proc.on('exit', resolve));
    try {
      const url = await new Promise<string>((resolve, reject) => {
        const timer = setInterval(() => {
          const m = /serving .* on (http:\/\/[\d.:]+); ready/.exec(out);
          if (m !== null) {
            clearInterval(timer);
            resolve(m[1]!);
          }
        }, 50);
        void exited.then((code) => {
          clearInterval(timer);
          reject(new Error(`exited ${String(code)} before ready: ${out}`));
        });
      });
      const r = await request(`${url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'tiny', messages: [{ role: 'user', content: 'hello' }], max_tokens: 4 }) });
      const body = (await r.body.json()) as { usage: { completion_tokens: number } };
      assert.equal(r.statusCode, 200, JSON.stringify(body));
      assert.ok(body.usage.completion_tokens >= 1);
      assert.doesNotMatch(out, /tsx|Cannot find/);
    } finally {
      proc.kill('SIGKILL');
      await exited;
    }

    // The self-training worker thread loads its compiled entry (no tsx to register): 150 admitted outcomes, one training.
    // (a file, not --eval: the worker inherits the process's flags, and --input-type is not one a worker takes)
    writeFileSync(path.join(app, 'train-check.mjs'), TRAIN);
    const trained = execFileSync(process.execPath, ['train-check.mjs'], { cwd: app, encoding: 'utf8' });
    const state = JSON.parse(trained) as { numTrainings: number; lastError: string | null };
    assert.equal(state.lastError, null, trained);
    assert.equal(state.numTrainings, 1, trained);
  } finally {
    rmSync(app, { recursive: true, force: true });
  }
});

const TRAIN = `
import { createAdmissionController } from './src/admission/factory.js';
import { NUM_FEATURES, extractFeatures } from './src/admission/features.js';
const c = createAdmissionController({ mode: 'conformal', selfTrain: true, selfTrainOptions: { minRows: 150, retrainEvery: 100000 } });
const snap = { numSteps: 100, atMs: 0, numWaiting: 0, numRunning: 2, numFreeSeqIds: 14, maxSequences: 16, numBlocks: 512, numFreeBlocks: 400, blockSize: 16,
  waitingPromptTokens: 0, runningPromptTokens: 0, remainingDecodeTokens: 50, promptWorkByDeadline: [], avgStepMs: 10, longStepMs: 10,
  prefillTokensPerS: 2000, decodeTokensPerS: 200, outputTokensP90: null, scheduler: {} };
for (let i = 0; i < 150; i++) {
  const prompt = 100 + ((i * 37) % 400);
  const ctx = { requestId: 'r' + i, arrivalMs: i * 10, sloMs: 60000, numPromptTokens: prompt, numCachedTokens: 0, maxTokens: 100, n: 1, numMessages: 1, ttftBudgetMs: null };
  const x = extractFeatures(ctx, snap, new Float64Array(NUM_FEATURES));
  const d = c.decide(ctx, snap, x);
  if (d.admit) c.observe(x, d, { e2eMs: 300 + prompt * 2 + ((i * 7919) % 97), ttftMs: 50, censored: false });
}
for (;;) {
  const s = c.state().e2e.selfTraining;
  if (!s.training) { process.stdout.write(JSON.stringify(s)); process.exit(0); }
  await new Promise((r) => setTimeout(r, 10));
}
`;
