// x-headroom-priority without flow control (no cap, one band): a malformed value is the same 400
// as with bands, never silently taken; a well-formed band number is accepted and ignored (a
// gateway with bands forwards its clients' header to engines that have none).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startTestServer } from '../helpers/headroom.ts';
import type { TestServer } from '../helpers/headroom.ts';
import { bandOf, PRIORITY_HEADER } from '../../src/flow/priority.ts';
import { noFlowControl } from '../../src/flow/flow-control.ts';
import { RequestError } from '../../src/util/request-error.ts';

let server: TestServer;
before(async () => {
  server = await startTestServer();
});
after(async () => {
  await server.close();
});

const post = async (priority: string): Promise<{ status: number; body: { error?: { code: string; param: string; message: string } } }> => {
  const res = await fetch(`${server.url}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', [PRIORITY_HEADER]: priority },
    body: JSON.stringify({ model: 'headroom-mock', prompt: 'the queue', max_tokens: 2 }),
  });
  return { status: res.status, body: (await res.json()) as { error?: { code: string; param: string; message: string } } };
};

const BAD = ['-1', 'NaN', 'high', '0.5', '1e3', '', ' ', '99999999999999999999', '0x1', '+1', 'Infinity'];

test('without flow control a malformed x-headroom-priority is a 400 naming the header', async () => {
  for (const bad of BAD) {
    const r = await post(bad);
    assert.deepEqual([r.status, r.body.error?.code, r.body.error?.param], [400, 'invalid_value', PRIORITY_HEADER], `'${bad}'`);
    assert.match(r.body.error!.message, /x-headroom-priority must be/);
  }
  for (const ok of ['0', '1', '7']) assert.equal((await post(ok)).status, 200, ok);
});

// Flow control names the problem (a RequestError, under the API); the API's error handler renders it.
const badHeader = (e: unknown): boolean => e instanceof RequestError && e.code === 'invalid_value' && e.param === PRIORITY_HEADER;

test('bandOf and the no-flow band agree on what is malformed', () => {
  for (const bad of BAD) {
    assert.throws(() => bandOf(bad, 3), badHeader, `bandOf '${bad}'`);
    assert.throws(() => noFlowControl.band(bad), badHeader, `noFlowControl '${bad}'`);
  }
  assert.equal(bandOf(undefined, 3), 2);
  assert.equal(bandOf('1', 3), 1);
  assert.throws(() => bandOf('3', 3), badHeader);
  assert.equal(noFlowControl.band(undefined), 0);
  assert.equal(noFlowControl.band('5'), 0);
});
