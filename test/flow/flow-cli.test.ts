// The flow-control flags of `headroom serve`: a cap from the command line reaches the server (a
// second concurrent request past --max-inflight-requests 1 with no queue is a 429 with
// Retry-After, /stats shows the bands), and bad band shares stop startup with one line and exit 1.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { request } from 'undici';
import { spawnServe } from '../helpers/serve-process.ts';

test('serve --max-inflight-requests 1 --flow-queue-size 0 --priority-bands 0.5,1: the second concurrent request is a 429 with Retry-After', async () => {
  const s = spawnServe(['--runner', 'mock', '--port', '0', '--host', '127.0.0.1', '--admission', 'off', '--mock-speed', '1', '--max-inflight-requests', '1', '--flow-queue-size', '0', '--priority-bands', '0.5,1']);
  try {
    const [, url] = await s.waitFor(/on (http:\/\/[0-9.:]+); ready/);
    const body = (max: number): string => JSON.stringify({ model: 'headroom-mock', prompt: 'the queue', max_tokens: max, ignore_eos: true });
    const long = request(`${url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: body(300) });
    for (;;) {
      const st = (await (await request(`${url}/stats`)).body.json()) as { flow: { inFlight: { requests: number }; queued: number[] } };
      assert.deepEqual(st.flow.queued, [0, 0]);
      if (st.flow.inFlight.requests === 1) break;
      await new Promise((r) => setTimeout(r, 5));
    }
    const r = await request(`${url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: body(2) });
    assert.equal(r.statusCode, 429);
    assert.ok(Number(r.headers['retry-after']) >= 1);
    assert.equal(((await r.body.json()) as { error: { code: string } }).error.code, 'rate_limited');
    assert.equal((await long).statusCode, 200);
  } finally {
    s.proc.kill('SIGKILL');
    await s.exited;
  }
});

test('serve --priority-bands 1,0.5 stops startup with one line naming the flag, exit 1', async () => {
  const s = spawnServe(['--runner', 'mock', '--port', '0', '--priority-bands', '1,0.5']);
  const { code } = await s.exited;
  assert.equal(code, 1);
  assert.match(s.stderr().trim(), /^headroom: error: --priority-bands: expected band shares to rise with the band, got 1,0\.5$/);
});
