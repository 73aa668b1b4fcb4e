// Headroom's chat-templated prompt tokens equal llama.cpp's `llama-server --jinja`, token for token,
// for every chat template llama.cpp ships and a fixed corpus of conversations (system or none,
// multi-turn, developer, tools, tool-call history, enable_thinking off/on, whitespace-padded
// content). The expected prompts and tokens come from llama-server itself, recorded once per
// llama.cpp commit by bench/peer/chat-fixtures.ts into test/fixtures/chat-templates.json; where
// llama-server refused a request, Headroom must refuse it too.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadLlamaAddon, llamaBinsDir } from '../../../../src/engine/runner/llama/addon.ts';
import type { AddonContext } from '../../../../src/engine/runner/llama/addon.ts';
import { LLAMA_MODELS_DIR, realVocabModel } from '../../../helpers/real-vocab.ts';
import { LLAMA_TEMPLATES_DIR } from '../../../../src/model/default-model.ts';

interface FixtureCase {
  name: string;
  request: Record<string, unknown>;
  prompt?: string;
  tokens?: number[];
  error?: { status: number; message: string };
}
interface Fixtures {
  llamaCommit: string;
  now: number;
  templates: Record<string, { vocab: string; error?: string; cases: FixtureCase[] }>;
}

// llama-server rendered the templates' dates (strftime_now, which reads local time) in UTC.
process.env['TZ'] = 'UTC';

// Templates that print today's date (strftime_now, llama.cpp's `datetime` and `date_string`) read
// the wall clock in llama.cpp, in Headroom as in llama-server, so a fixture recorded on another day
// holds another date. These are the forms the shipped templates print.
const MONTHS = ['January', 'February', 'March', 'April', 'May', 'June', 'July', 'August', 'September', 'October', 'November', 'December'];
function dateForms(ms: number): string[] {
  const d = new Date(ms);
  const y = String(d.getUTCFullYear());
  const m = d.getUTCMonth();
  const mm = String(m + 1).padStart(2, '0');
  const dd = String(d.getUTCDate()).padStart(2, '0');
  const month = MONTHS[m] ?? '';
  const mon = month.slice(0, 3);
  return [`${y}-${mm}-${dd}`, `${dd} ${mon} ${y}`, `${mon} ${dd} ${y}`, `${month} ${dd}, ${y}`];
}

/** The recorded prompt with the recording day's dates written as the day of `todayMs`. */
function redate(prompt: string, recordedMs: number, todayMs: number): string {
  const from = dateForms(recordedMs);
  const to = dateForms(todayMs);
  let out = prompt;
  from.forEach((f, i) => {
    out = out.split(f).join(to[i] ?? f);
  });
  return out;
}

/** Tokens outside the one differing span: equal prefix and suffix, and the span's length in each. */
function differingSpan(a: readonly number[], b: readonly number[]): { start: number; a: number; b: number } {
  let start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) start++;
  let end = 0;
  while (end < a.length - start && end < b.length - start && a[a.length - 1 - end] === b[b.length - 1 - end]) end++;
  return { start, a: a.length - start - end, b: b.length - start - end };
}

const FIXTURES = join(import.meta.dirname, '..', '..', '..', 'fixtures', 'chat-templates.json');

function firstDiff<T>(a: ArrayLike<T>, b: ArrayLike<T>): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return i;
  return a.length === b.length ? -1 : n;
}

/** Text around a differing index, both sides. */
function around(got: string, want: string, i: number): string {
  const cut = (s: string): string => JSON.stringify(s.slice(Math.max(0, i - 20), i + 40));
  return `headroom ${cut(got)} vs llama-server ${cut(want)}`;
}

function errorText(e: unknown): string {
  return (e instanceof Error ? e.message : String(e)).split('\n').filter((l) => l.trim() !== '' && !/^-+$/.test(l.trim())).slice(-1)[0] ?? '';
}

test("chat templates: Headroom's prompt tokens equal llama-server --jinja's for every shipped template", async (t) => {
  const fixtures = JSON.parse(readFileSync(FIXTURES, 'utf8')) as Fixtures;
  const vendored = execFileSync('git', ['-C', join(LLAMA_MODELS_DIR, '..'), 'rev-parse', 'HEAD'], { encoding: 'utf8' }).trim();
  assert.equal(fixtures.llamaCommit, vendored, `test/fixtures/chat-templates.json was made at llama.cpp ${fixtures.llamaCommit}, the vendored llama.cpp is ${vendored}: regenerate with bench/peer/chat-fixtures.ts (bench/peer/README.md)`);

  const addon = loadLlamaAddon();
  const contexts = new Map<string, AddonContext>();
  const open = (vocab: string): AddonContext => {
    let ctx = contexts.get(vocab);
    if (ctx === undefined) {
      ctx = new addon.HeadroomLlama({ modelPath: realVocabModel(vocab), binsDir: llamaBinsDir(), nCtx: 2048, nCtxMax: 2048, nSeqMax: 1, nBatch: 512, nUbatch: 512, threads: 1, threadsBatch: 1, verbose: false });
      contexts.set(vocab, ctx);
    }
    return ctx;
  };

  let equal = 0;
  let total = 0;
  let refusedBoth = 0;
  let redated = 0;
  const startedMs = Date.now();
  const mismatches: string[] = [];
  try {
    for (const [file, tmpl] of Object.entries(fixtures.templates)) {
      const ctx = open(tmpl.vocab);
      const source = readFileSync(join(LLAMA_TEMPLATES_DIR, file), 'utf8');
      let initError: string | undefined;
      try {
        ctx.chatInit(source);
      } catch (e) {
        initError = errorText(e);
      }
      if (tmpl.error !== undefined) {
        total++;
        if (initError !== undefined) {
          equal++;
          refusedBoth++;
        } else mismatches.push(`${file}: llama-server cannot load it (${tmpl.error}), Headroom loads it`);
        continue;
      }
      for (const c of tmpl.cases) {
        total++;
        const where = `${file} / ${c.name}`;
        if (initError !== undefined) {
          mismatches.push(`${where}: Headroom's chatInit throws (${initError}), llama-server renders it`);
          continue;
        }
        const json = JSON.stringify({ ...c.request, now: fixtures.now });
        const r = await ctx.chatTokenizeAsync(json, true);
        if (c.error !== undefined) {
          // llama-server answers 400 for a request its chat code refuses and 500 when the template
          // fails; Headroom's status 1 and 2 are the same two cases.
          const want = c.error.status < 500 ? 1 : 2;
          if (r.status === want) {
            equal++;
            refusedBoth++;
          } else mismatches.push(`${where}: llama-server answers ${c.error.status} (${errorText(new Error(c.error.message))}), Headroom's status is ${r.status}${r.status === 0 ? ' (renders it)' : ''}`);
          continue;
        }
        if (r.status !== 0) {
          mismatches.push(`${where}: Headroom refuses it (status ${r.status}: ${errorText(new Error(r.error ?? ''))}), llama-server renders it`);
          continue;
        }
        const want = c.tokens ?? [];
        const at = firstDiff(Array.from(r.tokens), want);
        if (at < 0) {
          equal++;
          continue;
        }
        let prompt = '';
        try {
          prompt = ctx.chatRender(json, true).prompt;
        } catch (e) {
          prompt = `<chatRender threw: ${errorText(e)}>`;
        }
        const recorded = c.prompt ?? '';
        if (recorded !== '' && fixtures.now > 0) {
          // A template that prints the date, recorded on another day: the recorded prompt with
          // today's date must be Headroom's prompt exactly, and the tokens may differ only in one
          // span no longer than a date (at most 12 tokens, in the tokenizers at hand).
          const today = [Date.now(), startedMs].map((ms) => redate(recorded, fixtures.now * 1000, ms));
          if (today.some((r) => r !== recorded && r === prompt)) {
            const span = differingSpan(Array.from(r.tokens), want);
            if (span.a <= 12 && span.b <= 12) {
              equal++;
              redated++;
              continue;
            }
          }
        }
        const want_ = recorded;
        const p = firstDiff(prompt, want_);
        const promptNote = p < 0 ? 'prompts equal' : `prompts differ at char ${p}: ${around(prompt, want_, p)}`;
        mismatches.push(`${where}: tokens differ at index ${at} (headroom ${r.tokens[at]}, llama-server ${want[at]}; lengths ${r.tokens.length}/${want.length}); ${promptNote}`);
      }
    }
  } finally {
    for (const ctx of contexts.values()) ctx.close();
  }
  t.diagnostic(`${equal}/${total} equal to llama-server (${refusedBoth} refused by both, ${redated} equal once the recording day's date reads as today's), ${Object.keys(fixtures.templates).length} templates, ${contexts.size} vocabularies`);
  assert.equal(mismatches.length, 0, `${mismatches.length} of ${total} differ from llama-server:\n${mismatches.join('\n')}`);
});
