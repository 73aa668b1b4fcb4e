// Every `results/...` and `bench/...` path that README.md, docs/**/*.md, bench/README.md and
// results/README.md name in code (fenced blocks and inline code spans) exists in the working tree,
// so a pasted command or a cited folder does not fail on a newcomer's checkout.
//
// The rule, path by path (all paths are relative to the repository root):
// - A path starts at `results/` or `bench/` not preceded by a word character, `.`, `-` or `/`
//   (so `$R/sweep`, `../x/bench/` and URLs are not paths here); it ends at whitespace, a quote, a
//   bracket or `,;:|`; trailing `.` and `/` are dropped.
// - Placeholders (`<run>`, `{a,b}`, `$VAR`, `...`): only the segments before the first one are
//   checked (`results/ladder/<study>` needs `results/ladder`).
// - Globs (`*`, `?` in a segment, e.g. `rate-*`): the path must match at least one file or folder.
// - `results/runs/` is skipped: it is where local runs write (.gitignore), never committed.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';

const DOCS = ['README.md', 'bench/README.md', 'results/README.md', ...markdownUnder('docs')];
const SKIP = ['results/runs/'];

function markdownUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.md')).map((f) => path.join(dir, f)).sort();
}

/** The text inside fenced code blocks and inline code spans of `markdown`. */
function codeOf(markdown: string): string[] {
  const code: string[] = [];
  const prose = markdown.replace(/^ {0,3}(```+|~~~+)[^\n]*\n([\s\S]*?)^ {0,3}\1[ \t]*$/gm, (_m, _fence: string, body: string) => {
    code.push(body);
    return '';
  });
  for (const m of prose.matchAll(/(`+)([^`]|[^`][\s\S]*?[^`])\1(?!`)/g)) code.push(m[2] ?? '');
  return code;
}

/** The `results/...` and `bench/...` paths named in `code`, as written (trailing `.` and `/` dropped). */
export function pathsIn(code: string): string[] {
  const out: string[] = [];
  for (const m of code.matchAll(/(?<![\w./-])((?:results|bench)\/[^\s`'"()[\]<>,;:|]*(?:<[^\s>]*>[^\s`'"()[\],;:|]*)*)/g)) {
    const p = (m[1] ?? '').replace(/[./]+$/, '');
    if (p.includes('/')) out.push(p);
  }
  return out;
}

/** Whether `p` (as `pathsIn` gives it) names something in the tree under the rule above. */
export function exists(p: string): boolean {
  const segments = p.split('/');
  const cut = segments.findIndex((s) => /[<{$]|\.\.\./.test(s));
  return matches('.', cut === -1 ? segments : segments.slice(0, cut));
}

function matches(base: string, segments: string[]): boolean {
  const [head, ...rest] = segments;
  if (head === undefined) return true;
  if (!/[*?]/.test(head)) return existsSync(path.join(base, head)) && matches(path.join(base, head), rest);
  if (!existsSync(base) || !statSync(base).isDirectory()) return false;
  const re = new RegExp(`^${head.replace(/[.+^()|[\]\\]/g, '\\$&').replace(/\*/g, '[^/]*').replace(/\?/g, '[^/]')}$`);
  return readdirSync(base).some((name) => re.test(name) && matches(path.join(base, name), rest));
}

test('the path rule: placeholders cut, globs match, prose and other prefixes ignored', () => {
  assert.deepEqual(pathsIn('x=results/gate/collect/round-1. $R/sweep ../a/bench/x https://h/results/x'), ['results/gate/collect/round-1']);
  assert.deepEqual(pathsIn('bench/peer/table.ts results/ladder/first-run/rate-*/* results/ladder/<study>#t'), ['bench/peer/table.ts', 'results/ladder/first-run/rate-*/*', 'results/ladder/<study>#t']);
  assert.deepEqual(codeOf('a `results/gate` b\n```sh\nls bench/peer\n```\nresults/not-code\n'), ['ls bench/peer\n', 'results/gate']);
  assert.ok(exists('results/ladder/<study>'));
  assert.ok(exists('results/ladder/first-run/rate-*/*'));
  assert.ok(!exists('results/ladder/no-such-study'));
  assert.ok(!exists('results/ladder/no-such-*'));
});

test('every results/ and bench/ path named in README.md and docs/ exists', () => {
  const missing: string[] = [];
  for (const file of DOCS) {
    if (!existsSync(file)) continue;
    for (const p of new Set(codeOf(readFileSync(file, 'utf8')).flatMap(pathsIn))) {
      if (SKIP.some((s) => `${p}/`.startsWith(s))) continue;
      if (!exists(p)) missing.push(`${file}: ${p}`);
    }
  }
  assert.deepEqual(missing, [], `paths named in docs that do not exist:\n${missing.join('\n')}`);
});
