// Chat-template fixtures from llama.cpp's own `llama-server --jinja`: for every chat template
// llama.cpp ships (native/vendor/llama.cpp/models/templates/*.jinja) and a fixed corpus of
// conversations, the prompt llama-server renders (POST /apply-template) and the tokens it feeds the
// model (POST /tokenize with add_special and parse_special on, as its chat path tokenizes a prompt).
// test/engine/runner/llama/chat-fixtures.test.ts compares Headroom's chat path to these token for
// token, without llama-server. Generated once per llama.cpp commit; the fixture records the commit.
//
//   node --import tsx bench/peer/chat-fixtures.ts --llama-server PATH [--out test/fixtures/chat-templates.json]
//   (or LLAMA_SERVER=PATH; bench/peer/build-llama-server.sh builds it from the vendored commit;
//   --only TEXT: just the templates whose file name contains TEXT, to look at one)
//
// One micro model (random weights, a real vocabulary, no template: test/helpers/real-vocab.ts) per
// vocabulary; llama-server is started once per template on it with --chat-template-file, TZ=UTC,
// one thread. The corpus never spells a control token in message text, so llama-server's chat
// path and Headroom's literal-control-text mode must agree.
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { realVocabModel } from '../../test/helpers/real-vocab.ts';
import { LLAMA_TEMPLATES_DIR } from '../../src/model/default-model.ts';

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

/**
 * Template file → vocabulary (ggml-vocab-<name>.gguf), first match wins. The vocabulary of the
 * template's model family where llama.cpp ships one (so its control tokens are real tokens);
 * otherwise qwen2, whose ChatML markers are control tokens and whose BPE is the most common kind.
 */
export const VOCAB_BY_TEMPLATE: ReadonlyArray<readonly [RegExp, string]> = [
  [/^Qwen3\.5/, 'qwen35'],
  [/Qwen|QwQ/, 'qwen2'], // Qwen2.5, Qwen3, QwQ, Qwen3-Coder, DeepSeek-R1-Distill-Qwen
  [/llama-3|Llama-3|Hermes-3|Hermes-2-Pro-Llama-3|firefunction|R1-Distill-Llama|functionary|SmolLM3/, 'llama-bpe'], // Llama 3.x tokenizer
  [/gemma/, 'gemma-4'], // gemma-4 (and gemma-2: the only Gemma vocabulary shipped)
  [/Phi/, 'phi-3'],
  [/Mistral|Ministral|Devstral/, 'llama-spm'], // Mistral's SPM family
  [/deepseek/i, 'deepseek-llm'], // DeepSeek V3.x/V4, llama.cpp's R1 template
  [/command-r|Cohere/, 'command-r'],
  [/./, 'qwen2'], // gpt-oss, GLM, Kimi, MiniMax, Granite, LFM2, Apertus, Apriel, ... (no own vocabulary shipped)
];

export function vocabFor(templateFile: string): string {
  for (const [re, vocab] of VOCAB_BY_TEMPLATE) if (re.test(templateFile)) return vocab;
  return 'qwen2';
}

const TOOLS = [
  {
    type: 'function',
    function: {
      name: 'get_weather',
      description: 'Get the current weather in a city.',
      parameters: { type: 'object', properties: { city: { type: 'string', description: 'The city name' } }, required: ['city'] },
    },
  },
  {
    type: 'function',
    function: {
      name: 'get_time',
      description: 'Get the local time in an IANA time zone.',
      parameters: {
        type: 'object',
        properties: { timezone: { type: 'string', description: 'For example Europe/Paris' }, format: { type: 'string', enum: ['12h', '24h'] } },
        required: ['timezone'],
      },
    },
  },
];
const CALL = { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } };
const MULTI_TURN = [
  { role: 'user', content: 'What is 17 * 23?' },
  { role: 'assistant', content: '17 * 23 = 391.' },
  { role: 'user', content: 'And 17 * 24?' },
];

/** The corpus: OpenAI chat requests (without `now`: the fixture's `now` is added to each). */
export const CORPUS: ReadonlyArray<{ name: string; request: Record<string, unknown> }> = [
  { name: 'user-only', request: { messages: [{ role: 'user', content: 'What is the capital of France?' }] } },
  {
    name: 'system-3-turns',
    request: {
      messages: [
        { role: 'system', content: 'You are a helpful assistant.' },
        { role: 'user', content: 'Hi!' },
        { role: 'assistant', content: 'Hello! How can I help you today?' },
        { role: 'user', content: 'Tell me a short joke.' },
      ],
    },
  },
  {
    name: 'whitespace-padded',
    request: {
      messages: [
        { role: 'system', content: '  Be brief.  \n' },
        { role: 'user', content: '\n  What is 2 + 2?  \n\n' },
      ],
    },
  },
  {
    name: 'developer',
    request: {
      messages: [
        { role: 'developer', content: 'Answer in French.' },
        { role: 'user', content: 'Good morning!' },
      ],
    },
  },
  {
    name: 'tools',
    request: {
      messages: [
        { role: 'system', content: 'You can look things up with tools.' },
        { role: 'user', content: 'What is the weather in Paris?' },
      ],
      tools: TOOLS,
      tool_choice: 'auto',
    },
  },
  {
    name: 'tool-call-history',
    request: {
      messages: [
        { role: 'user', content: 'What is the weather in Paris?' },
        { role: 'assistant', content: null, tool_calls: [CALL] },
        { role: 'tool', tool_call_id: 'call_1', content: '{"temp_c": 21}' },
        { role: 'user', content: 'Thanks! Should I take a coat?' },
      ],
      tools: TOOLS,
      tool_choice: 'auto',
    },
  },
  {
    name: 'tool-call-history-no-content',
    request: {
      messages: [
        { role: 'user', content: 'What is the weather in Paris?' },
        { role: 'assistant', tool_calls: [CALL] },
        { role: 'tool', tool_call_id: 'call_1', content: '{"temp_c": 21}' },
        { role: 'user', content: 'Thanks! Should I take a coat?' },
      ],
    },
  },
  { name: 'thinking-off', request: { messages: MULTI_TURN, chat_template_kwargs: { enable_thinking: false } } },
  { name: 'thinking-on', request: { messages: MULTI_TURN, chat_template_kwargs: { enable_thinking: true } } },
  {
    // An earlier turn's reasoning (the API's reasoning_content): whether a template keeps it is up to
    // llama-server's reasoning-preserve default.
    name: 'reasoning-history',
    request: {
      messages: [
        { role: 'user', content: 'What is 17 * 23?' },
        { role: 'assistant', content: '17 * 23 = 391.', reasoning_content: '17 * 20 = 340 and 17 * 3 = 51; 340 + 51 = 391.' },
        { role: 'user', content: 'And 17 * 24?' },
      ],
    },
  },
];

export interface FixtureCase {
  name: string;
  request: Record<string, unknown>;
  prompt?: string;
  tokens?: number[];
  /** llama-server refused the request: its HTTP status and message. */
  error?: { status: number; message: string };
}
export interface FixtureTemplate {
  vocab: string;
  /** Set when llama-server could not start with the template at all (cases is then empty). */
  error?: string;
  cases: FixtureCase[];
}
export interface ChatFixtures {
  generatedBy: string;
  llamaCommit: string;
  llamaServerVersion: string;
  /** Epoch seconds when generation started: the clock templates print (pass it as `now`). */
  now: number;
  corpus: string[];
  templates: Record<string, FixtureTemplate>;
}

function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const s = createServer();
    s.once('error', rej);
    s.listen(0, '127.0.0.1', () => {
      const addr = s.address();
      const port = typeof addr === 'object' && addr !== null ? addr.port : 0;
      s.close(() => res(port));
    });
  });
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

interface Server {
  child: ChildProcess;
  base: string;
  log: () => string;
}

/** Starts llama-server; resolves once /health is 200, or with the reason it exited. */
async function startServer(bin: string, model: string, templatePath: string): Promise<Server | { error: string }> {
  const port = await freePort();
  const args = ['-m', model, '--jinja', '--chat-template-file', templatePath, '-c', '2048', '-t', '1', '-tb', '1', '-np', '1'];
  args.push('--host', '127.0.0.1', '--port', String(port), '--no-webui', '--no-warmup');
  const child = spawn(bin, args, { env: { ...process.env, TZ: 'UTC' }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (out += d.toString()));
  let exited: number | null | undefined;
  child.once('exit', (code) => (exited = code));
  const base = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 120_000;
  while (Date.now() < deadline) {
    if (exited !== undefined) return { error: failureReason(out, exited) };
    try {
      const r = await fetch(`${base}/health`);
      await r.arrayBuffer();
      if (r.status === 200) return { child, base, log: () => out };
    } catch {
      // not listening yet
    }
    await sleep(100);
  }
  await stopServer({ child, base, log: () => out });
  return { error: `llama-server did not become healthy in 120 s: ${lastLines(out, 3)}` };
}

function lastLines(text: string, n: number): string {
  return text.trim().split('\n').slice(-n).join(' | ');
}

/** The lines of llama-server's log that say why it stopped. */
function failureReason(log: string, code: number | null): string {
  const lines = log.split('\n').filter((l) => /error|failed|exception|unsupported|not supported/i.test(l));
  const reason = lines.length > 0 ? lines.slice(0, 3).join(' | ') : lastLines(log, 3);
  return `llama-server exited (${code}): ${reason.trim()}`;
}

async function stopServer(s: Server): Promise<void> {
  if (s.child.exitCode !== null || s.child.signalCode !== null) return;
  const done = new Promise((r) => s.child.once('exit', r));
  s.child.kill('SIGTERM');
  const t = setTimeout(() => s.child.kill('SIGKILL'), 10_000);
  await done;
  clearTimeout(t);
}

async function post(base: string, path: string, body: unknown): Promise<{ status: number; json: Record<string, unknown> }> {
  const r = await fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const text = await r.text();
  let json: Record<string, unknown>;
  try {
    json = JSON.parse(text) as Record<string, unknown>;
  } catch {
    json = { raw: text };
  }
  return { status: r.status, json };
}

function errorMessage(json: Record<string, unknown>): string {
  const e = json['error'];
  if (typeof e === 'object' && e !== null && typeof (e as Record<string, unknown>)['message'] === 'string') return (e as Record<string, string>)['message']!;
  return JSON.stringify(json);
}

async function runCase(base: string, c: { name: string; request: Record<string, unknown> }): Promise<FixtureCase> {
  const applied = await post(base, '/apply-template', c.request);
  if (applied.status !== 200) return { name: c.name, request: c.request, error: { status: applied.status, message: errorMessage(applied.json) } };
  const prompt = applied.json['prompt'];
  if (typeof prompt !== 'string') throw new Error(`${c.name}: /apply-template returned no prompt: ${JSON.stringify(applied.json)}`);
  const tok = await post(base, '/tokenize', { content: prompt, add_special: true, parse_special: true });
  const tokens = tok.json['tokens'];
  if (tok.status !== 200 || !Array.isArray(tokens)) throw new Error(`${c.name}: /tokenize failed (${tok.status}): ${JSON.stringify(tok.json)}`);
  return { name: c.name, request: c.request, prompt, tokens: tokens as number[] };
}

/** JSON with one line per case: diffable, and token arrays never spread over lines. */
export function formatFixtures(f: ChatFixtures): string {
  const lines = ['{'];
  const { templates, ...head } = f;
  for (const [k, v] of Object.entries(head)) lines.push(`  ${JSON.stringify(k)}: ${JSON.stringify(v)},`);
  lines.push('  "templates": {');
  const names = Object.keys(templates);
  names.forEach((name, i) => {
    const t = templates[name]!;
    const { cases, ...rest } = t;
    const restJson = JSON.stringify(rest).slice(1, -1);
    lines.push(`    ${JSON.stringify(name)}: {${restJson}, "cases": [`);
    cases.forEach((c, j) => lines.push(`      ${JSON.stringify(c)}${j < cases.length - 1 ? ',' : ''}`));
    lines.push(`    ]}${i < names.length - 1 ? ',' : ''}`);
  });
  lines.push('  }', '}', '');
  return lines.join('\n');
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      'llama-server': { type: 'string' },
      out: { type: 'string' },
      only: { type: 'string' },
    },
  });
  const bin = values['llama-server'] ?? process.env['LLAMA_SERVER'];
  if (bin === undefined || !existsSync(bin)) {
    console.error('usage: node --import tsx bench/peer/chat-fixtures.ts --llama-server PATH [--out FILE] (or LLAMA_SERVER=PATH)');
    process.exit(2);
  }
  if (values.only !== undefined && values.out === undefined) {
    console.error('chat-fixtures: --only needs --out (a subset must not replace the fixture)');
    process.exit(2);
  }
  const out = values.out ?? join(repoRoot, 'test', 'fixtures', 'chat-templates.json');
  const vendor = join(repoRoot, 'native', 'vendor', 'llama.cpp');
  const llamaCommit = execFileSync('git', ['-C', vendor, 'rev-parse', 'HEAD'], { encoding: 'utf8' }).trim();
  // `--version` prints to stderr: read both streams.
  const v = spawnSync(bin, ['--version'], { encoding: 'utf8' });
  const versionText = `${v.stdout}${v.stderr}`;
  const short = /commit ([0-9a-f]+)/.exec(versionText)?.[1];
  if (short === undefined || !llamaCommit.startsWith(short)) {
    throw new Error(`llama-server (${versionText.trim().split('\n')[0]}) is not built from the vendored llama.cpp commit ${llamaCommit}; rebuild it (bench/peer/build-llama-server.sh)`);
  }

  const now = Math.floor(Date.now() / 1000);
  const day = (s: number): string => new Date(s * 1000).toISOString().slice(0, 10);
  const files = readdirSync(LLAMA_TEMPLATES_DIR)
    .filter((f) => f.endsWith('.jinja'))
    .filter((f) => values.only === undefined || f.includes(values.only))
    .sort();
  const templates: Record<string, FixtureTemplate> = {};
  let failed = 0;
  let refused = 0;
  for (const file of files) {
    const vocab = vocabFor(file);
    const model = realVocabModel(vocab);
    const t0 = Date.now();
    const s = await startServer(bin, model, join(LLAMA_TEMPLATES_DIR, file));
    if ('error' in s) {
      templates[file] = { vocab, error: s.error, cases: [] };
      failed++;
      console.error(`${file} [${vocab}]: ${s.error}`);
      continue;
    }
    const cases: FixtureCase[] = [];
    try {
      for (const c of CORPUS) cases.push(await runCase(s.base, c));
    } finally {
      await stopServer(s);
    }
    templates[file] = { vocab, cases };
    const bad = cases.filter((c) => c.error !== undefined);
    refused += bad.length;
    console.error(`${file} [${vocab}]: ${cases.length - bad.length}/${cases.length} rendered (${Date.now() - t0} ms)${bad.map((c) => `; ${c.name}: ${c.error?.status} ${lastLines(c.error?.message ?? '', 1)}`).join('')}`);
  }
  const end = Math.floor(Date.now() / 1000);
  if (day(end) !== day(now)) throw new Error(`the UTC date changed during generation (${day(now)} → ${day(end)}); run it again`);

  const fixtures: ChatFixtures = {
    generatedBy: 'node --import tsx bench/peer/chat-fixtures.ts --llama-server PATH',
    llamaCommit,
    llamaServerVersion: /^version: .*$/m.exec(versionText)?.[0] ?? '',
    now,
    corpus: CORPUS.map((c) => c.name),
    templates,
  };
  writeFileSync(out, formatFixtures(fixtures));
  console.error(`${files.length} templates (${failed} llama-server cannot load), ${refused} refused cases → ${out}`);
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  await main();
}
