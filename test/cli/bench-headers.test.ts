// `bench run --api-key K --header 'name: value'` sends both on every request the load generator
// makes (the model lookup, /stats and each chat completion), and meta.json never records their
// values. The target is a minimal OpenAI-shaped server that logs what it received.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { runCli } from './run-cli.ts';

interface Seen {
  readonly path: string;
  readonly authorization: string | undefined;
  readonly tenant: string | undefined;
}

function fakeServer(seen: Seen[]): http.Server {
  return http.createServer((req, res) => {
    seen.push({ path: req.url ?? '', authorization: req.headers['authorization'], tenant: req.headers['x-tenant'] as string | undefined });
    req.resume();
    if (req.url === '/v1/models') {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ data: [{ id: 'fake' }] }));
      return;
    }
    if (req.url === '/v1/chat/completions') {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(`data: ${JSON.stringify({ choices: [{ delta: { content: 'hi' }, finish_reason: null }] })}\n\n`);
      res.write(`data: ${JSON.stringify({ choices: [{ delta: {}, finish_reason: 'stop' }] })}\n\n`);
      res.end('data: [DONE]\n\n');
      return;
    }
    res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":{"message":"no"}}');
  });
}

test('bench run sends --api-key and --header on every request, and meta.json redacts them', async () => {
  const seen: Seen[] = [];
  const srv = fakeServer(seen);
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const { port } = srv.address() as AddressInfo;
  const dir = mkdtempSync(join(tmpdir(), 'headroom-bench-headers-'));
  try {
    const r = await runCli(['bench', 'run', '--url', `http://127.0.0.1:${port}`, '--rate', '10', '--duration-s', '1', '--api-key', 'sk-test-123', '--header', 'X-Tenant: team-a', '--out', join(dir, 'run'), '--json', '--max-slip-p99-ms', '1000']);
    assert.equal(r.code, 0, r.stderr);
    const chats = seen.filter((s) => s.path === '/v1/chat/completions');
    assert.ok(chats.length > 0, 'no chat completion was sent');
    assert.ok(seen.some((s) => s.path === '/v1/models'));
    for (const s of seen) {
      assert.equal(s.authorization, 'Bearer sk-test-123', `${s.path} without the API key`);
      assert.equal(s.tenant, 'team-a', `${s.path} without x-tenant`);
    }
    const meta = readFileSync(join(dir, 'run', 'meta.json'), 'utf8');
    assert.doesNotMatch(meta, /sk-test-123|team-a/);
    assert.deepEqual((JSON.parse(meta) as { config: { headers: unknown } }).config.headers, { 'x-tenant': '<redacted>', authorization: '<redacted>' });
  } finally {
    srv.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
