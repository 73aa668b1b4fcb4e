// The paths that answer without an API key are exactly the ones docs/operations.md lists as open
// ("Open paths"): every GET route the server registers is asked without a key, with and without
// --protect-metrics.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { startOpsServer } from './ops-server.ts';

const KEYS = ['sk-alpha-000000001 team-a'];

/** Every GET route in src/api/server.ts. */
function getRoutes(): string[] {
  const server = readFileSync(new URL('../../src/api/server.ts', import.meta.url), 'utf8');
  const routes = [...server.matchAll(/route\('GET', '([^']+)'/g)].map((m) => m[1]!);
  assert.ok(routes.length >= 8, `found the GET routes (${routes.length})`);
  return routes;
}

/** The backticked paths the "Open paths" paragraph of docs/operations.md lists before "Everything else". */
function documentedOpen(): string[] {
  const doc = readFileSync(new URL('../../docs/operations.md', import.meta.url), 'utf8');
  const start = doc.indexOf('**Open paths**');
  assert.ok(start >= 0, 'docs/operations.md has an "Open paths" paragraph');
  const para = doc.slice(start, doc.indexOf('Everything else', start));
  return [...new Set([...para.matchAll(/`(\/[^`\s]*)`/g)].map((m) => m[1]!))].sort();
}

async function openWithout(protectMetrics: boolean): Promise<string[]> {
  const s = await startOpsServer({ keys: KEYS, server: { protectMetrics } });
  try {
    const open: string[] = [];
    for (const path of getRoutes()) {
      const res = await fetch(`${s.url}${path}`);
      await res.arrayBuffer();
      if (res.status !== 401) open.push(path);
    }
    return open.sort();
  } finally {
    await s.close();
  }
}

test('the open paths in docs/operations.md are the ones the server answers without a key', async () => {
  const open = await openWithout(false);
  assert.deepEqual(open, documentedOpen());
  assert.ok(open.includes('/dashboard'), 'the dashboard is open like /metrics');
  // --protect-metrics closes the scrape and the dashboard: only the probes stay open.
  assert.deepEqual(await openWithout(true), ['/health', '/ready']);
});
