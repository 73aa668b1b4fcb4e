// docs/api.md lists every field: each one the request schemas implement, each refused and each
// ignored one in src/api/unsupported.ts appears on the page (in backticks), so a field added to
// the code without a line in the docs fails here.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { chatCompletionBody, completionBody, responsesBody } from '../../src/api/schemas.ts';
import { IGNORED, REFUSED } from '../../src/api/unsupported.ts';

const doc = readFileSync(new URL('../../docs/api.md', import.meta.url), 'utf8');
const section = (title: string): string => {
  const start = doc.indexOf(`## ${title}`);
  assert.ok(start >= 0, `docs/api.md has a section "${title}"`);
  const end = doc.indexOf('\n## ', start + 1);
  return doc.slice(start, end < 0 ? undefined : end);
};

test('docs/api.md names every implemented, refused and ignored field in its section', () => {
  const implemented = new Set([chatCompletionBody, completionBody, responsesBody].flatMap((s) => Object.keys(s.shape)));
  const missing = [
    ...[...implemented].filter((f) => !section('Implemented fields').includes(`\`${f}\``)).map((f) => `implemented ${f}`),
    ...REFUSED.filter((r) => !section('Refused fields').includes(`\`${r.field}\``)).map((r) => `refused ${r.field}`),
    ...IGNORED.filter((r) => !section('Ignored fields').includes(`\`${r.field}\``)).map((r) => `ignored ${r.field}`),
  ];
  assert.deepEqual(missing, []);
});

test('docs/api.md lists every route the server registers', () => {
  const server = readFileSync(new URL('../../src/api/server.ts', import.meta.url), 'utf8');
  const routes = [...server.matchAll(/route\('(GET|POST)', '([^']+)'/g)].map((m) => `${m[1]} ${m[2]}`);
  assert.ok(routes.length >= 10, `found the routes (${routes.length})`);
  const endpoints = section('Endpoints');
  assert.deepEqual(routes.filter((r) => !endpoints.includes(r)), []);
});
