// The operations flags of `headroom serve`, end to end in a real process: --api-key-file and
// HEADROOM_API_KEYS, --served-model-name (several), --cors-origin (repeated), --log-format text,
// and the lifecycle lines going through the same logger as the request lines.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { request } from 'undici';
import { spawnServe } from '../helpers/serve-process.ts';

test('serve wires keys from a file and the environment, aliases, CORS origins and text logs', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'headroom-ops-'));
  const keyFile = join(dir, 'keys.txt');
  writeFileSync(keyFile, '# keys\nsk-file-000000001 from-file\n');
  process.env.HEADROOM_API_KEYS = 'sk-env-0000000001 from-env operator';
  const p = spawnServe(['--runner', 'mock', '--host', '127.0.0.1', '--port', '0', '--admission', 'off', '--log-format', 'text', '--api-key-file', keyFile, '--served-model-name', 'm1', 'm2', '--cors-origin', 'https://a.example', '--cors-origin', 'https://b.example:8443']);
  delete process.env.HEADROOM_API_KEYS;
  try {
    const url = (await p.waitFor(/serving .* on (http:\/\/[\d.:]+)/))[1]!;
    assert.match(p.output(), /INFO  listening at http/);
    const denied = await request(`${url}/v1/models`);
    await denied.body.dump();
    assert.equal(denied.statusCode, 401);
    const models = await request(`${url}/v1/models`, { headers: { authorization: 'Bearer sk-file-000000001' } });
    assert.deepEqual(((await models.body.json()) as { data: { id: string }[] }).data.map((m) => m.id), ['m1', 'm2']);
    const r = await request(`${url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': 'sk-env-0000000001', origin: 'https://b.example:8443', 'x-request-id': 'cli-req-1', 'x-headroom-bypass-admission': '1' },
      body: JSON.stringify({ model: 'm2', prompt: 'a secret prompt', max_tokens: 3 }),
    });
    const body = (await r.body.json()) as { model: string };
    assert.equal(r.statusCode, 200);
    assert.equal(body.model, 'm2');
    assert.equal(r.headers['access-control-allow-origin'], 'https://b.example:8443');
    const line = (await p.waitFor(/INFO  request request_id=cli-req-1 .*\n/))[0];
    assert.match(line, /tenant=from-env method=POST route=\/v1\/completions status=200 outcome=ok bypass_admission=true model=m2 prompt_tokens=\d+ completion_tokens=3/);
    assert.doesNotMatch(p.output(), /secret prompt/);
    p.proc.kill('SIGTERM');
    const exit = await p.exited;
    assert.equal(exit.code, 0);
    assert.match(p.output(), /INFO  SIGTERM: draining/);
    assert.match(p.output(), /INFO  drained; exiting/, 'the line just before process.exit is not lost');
  } finally {
    p.proc.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
});
