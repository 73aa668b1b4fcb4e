// API keys: a missing or wrong key is 401 in OpenAI's shape with WWW-Authenticate; a good one,
// as a Bearer token or x-api-key, names a tenant that reaches flow control, the log line and a
// bounded metric label; probes and the scrape stay open. Operators may skip admission with
// x-headroom-bypass-admission; anyone else asking is 403.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { request } from 'undici';
import type { AdmissionController } from '../../src/admission/controller.ts';
import { BoundModel } from '../../src/admission/bound-model.ts';
import { ConformalController } from '../../src/admission/conformal-controller.ts';
import { createOnlineCalibrator } from '../../src/admission/conformal/online-calibrator.ts';
import { ratioScore } from '../../src/admission/conformal/score.ts';
import { NUM_FEATURES } from '../../src/admission/features.ts';
import { toPredictor } from '../../src/admission/predictor/predictor.ts';
import { KeyRing } from '../../src/api/auth.ts';
import { refusal } from '../../src/backend/refusal.ts';
import type { Caller, FlowControl } from '../../src/flow/flow-control.ts';
import { noFlowControl } from '../../src/flow/flow-control.ts';
import { startOpsServer, until } from './ops-server.ts';

const KEYS = ['# team keys', 'sk-alpha-000000001 team-a', 'sk-beta-0000000002 team-b user  # trailing comment', '', 'sk-ops-00000000003 ops operator'];

const body = JSON.stringify({ model: 'headroom-mock', prompt: 'the queue', max_tokens: 3 });
const post = (url: string, headers: Record<string, string> = {}) => request(`${url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });

/** Remembers who flow control saw. */
function recordingFlow(): FlowControl & { callers: Caller[] } {
  const callers: Caller[] = [];
  return { ...noFlowControl, name: 'recording', callers, acquire: (r) => (callers.push(r.caller), { ok: true, ticket: { release: () => undefined } }) };
}

/** Admission on, refusing every request it is asked about, and counting the questions. */
function refuseAll(): AdmissionController & { numDecided: number } {
  const c = {
    name: 'refuse-all',
    needsFeatures: false,
    numDecided: 0,
    decide: () => {
      c.numDecided++;
      return { admit: false as const, boundMs: 9000, reason: 'over_budget', memo: null, refusal: refusal('conformal') };
    },
    observe: () => undefined,
    state: () => ({}),
  };
  return c;
}

test('no key or a wrong one: 401 invalid_api_key with WWW-Authenticate; probes and /metrics stay open, /stats and /v1/models do not', async () => {
  const s = await startOpsServer({ keys: KEYS });
  try {
    for (const headers of [{}, { authorization: 'Bearer sk-wrong-00000000' }, { 'x-api-key': 'sk-alpha-000000002' }, { authorization: 'Basic c2stYWxwaGE=' }]) {
      const r = await post(s.url, headers);
      const e = (await r.body.json()) as { error: { type: string; code: string; message: string; param: null } };
      assert.equal(r.statusCode, 401, JSON.stringify(headers));
      assert.equal(r.headers['www-authenticate'], 'Bearer');
      assert.deepEqual([e.error.type, e.error.code, e.error.param], ['invalid_request_error', 'invalid_api_key', null]);
      assert.ok(!e.error.message.includes('sk-'), 'the key is never echoed');
    }
    for (const path of ['/health', '/ready', '/metrics', '/dashboard', '/dashboard/data', '/dashboard/runs']) assert.equal((await request(`${s.url}${path}`)).statusCode, 200, path);
    for (const path of ['/stats', '/v1/models', '/v1/nowhere']) assert.equal((await request(`${s.url}${path}`)).statusCode, 401, path);
    const metrics = await (await request(`${s.url}/metrics`)).body.text();
    assert.match(metrics, /^headroom_auth_failures_total 7$/m);
  } finally {
    await s.close();
  }
});

test('--protect-metrics: the scrape needs a key too; probes stay open', async () => {
  const s = await startOpsServer({ keys: KEYS, server: { protectMetrics: true } });
  try {
    assert.equal((await request(`${s.url}/metrics`)).statusCode, 401);
    assert.equal((await request(`${s.url}/metrics`, { headers: { authorization: 'Bearer sk-alpha-000000001' } })).statusCode, 200);
    // The dashboard is guarded like the scrape.
    for (const path of ['/dashboard', '/dashboard/data', '/dashboard/runs']) assert.equal((await request(`${s.url}${path}`)).statusCode, 401, path);
    assert.equal((await request(`${s.url}/dashboard/data`, { headers: { authorization: 'Bearer sk-alpha-000000001' } })).statusCode, 200);
    assert.equal((await request(`${s.url}/health`)).statusCode, 200);
    assert.equal((await request(`${s.url}/ready`)).statusCode, 200);
  } finally {
    await s.close();
  }
});

test('a good key (Bearer or x-api-key) names the tenant flow control, the log line and the metric see', async () => {
  const flow = recordingFlow();
  const s = await startOpsServer({ keys: KEYS, flow });
  try {
    const a = await post(s.url, { authorization: 'Bearer sk-alpha-000000001' });
    const b = await post(s.url, { 'x-api-key': 'sk-beta-0000000002' });
    await Promise.all([a.body.json(), b.body.json()]);
    assert.deepEqual([a.statusCode, b.statusCode], [200, 200]);
    assert.deepEqual(flow.callers, [{ tenant: 'team-a', role: 'user' }, { tenant: 'team-b', role: 'user' }]);
    await until(() => s.requests().length === 2, 'two lines');
    assert.deepEqual(s.requests().map((l) => l.tenant), ['team-a', 'team-b']);
    const metrics = await (await request(`${s.url}/metrics`)).body.text();
    assert.match(metrics, /^headroom_api_requests_total\{tenant="team-a",outcome="ok"\} 1$/m);
    assert.match(metrics, /^headroom_api_requests_total\{tenant="ops",outcome="ok"\} 0$/m, 'every configured tenant exists from the start');
    assert.doesNotMatch(metrics, /sk-alpha/);
  } finally {
    await s.close();
  }
});

test('without keys everything is open and the caller is tenant default (the user field does not pick a tenant)', async () => {
  const flow = recordingFlow();
  const s = await startOpsServer({ flow });
  try {
    const r = await request(`${s.url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'headroom-mock', prompt: 'x', max_tokens: 2, user: 'mallory' }) });
    await r.body.json();
    assert.equal(r.statusCode, 200);
    assert.deepEqual(flow.callers, [{ tenant: 'default', role: 'user' }]);
  } finally {
    await s.close();
  }
});

test('an operator key with x-headroom-bypass-admission: 1 skips a refusing controller; a user key or no keys asking for it get 403', async () => {
  const admission = refuseAll();
  const s = await startOpsServer({ keys: KEYS, admission });
  try {
    const refused = await post(s.url, { authorization: 'Bearer sk-ops-00000000003' });
    await refused.body.dump();
    assert.equal(refused.statusCode, 503, 'an operator without the header is decided on like anyone');
    assert.equal(admission.numDecided, 1);

    const bypass = await post(s.url, { authorization: 'Bearer sk-ops-00000000003', 'x-headroom-bypass-admission': '1' });
    const served = (await bypass.body.json()) as { usage: { completion_tokens: number } };
    assert.equal(bypass.statusCode, 200);
    assert.equal(served.usage.completion_tokens, 3);
    assert.equal(admission.numDecided, 1, 'the controller was not asked');

    const user = await post(s.url, { authorization: 'Bearer sk-alpha-000000001', 'x-headroom-bypass-admission': '1' });
    const e = (await user.body.json()) as { error: { code: string; param: string } };
    assert.equal(user.statusCode, 403);
    assert.deepEqual([e.error.code, e.error.param], ['permission_denied', 'x-headroom-bypass-admission']);

    const odd = await post(s.url, { authorization: 'Bearer sk-ops-00000000003', 'x-headroom-bypass-admission': 'yes please' });
    await odd.body.dump();
    assert.equal(odd.statusCode, 400);

    await until(() => s.requests().length === 4, 'four lines');
    const line = s.requests().find((l) => l.request_id === bypass.headers['x-request-id'])!;
    assert.deepEqual([line.tenant, line.bypass_admission, line.outcome], ['ops', true, 'ok']);
    const metrics = await (await request(`${s.url}/metrics`)).body.text();
    assert.match(metrics, /^headroom_admission_bypassed_total\{tenant="ops"\} 1$/m);
    assert.match(metrics, /^headroom_admission_bypassed_total\{tenant="team-a"\} 0$/m);
  } finally {
    await s.close();
  }
  const open = await startOpsServer({ admission: refuseAll() });
  try {
    const r = await post(open.url, { 'x-headroom-bypass-admission': '1' });
    await r.body.dump();
    assert.equal(r.statusCode, 403, 'without keys nobody is an operator');
  } finally {
    await open.close();
  }
});

/** The conformal controller with a constant 2 s bound, calibrated (as in test/admission/controller-http.test.ts). */
function boundOf2s(): ConformalController {
  const alpha = 0.05;
  const initial = Array.from({ length: 200 }, () => ({ yhat: 2000, y: 2000 }));
  const model = () => new BoundModel({ kind: 'artifact', predictor: toPredictor({ kind: 'constant', quantile: 0.9, value: 2000, numFeatures: NUM_FEATURES }), description: 'constant' }, createOnlineCalibrator({ mode: 'static', score: ratioScore, alpha, initial }));
  return new ConformalController({ alpha, e2e: model(), ttft: model() });
}

test('the conformal controller refuses a 1 s budget on a busy engine; the operator bypass is served anyway', async () => {
  const s = await startOpsServer({ keys: KEYS, admission: boundOf2s(), mock: { cost: { speed: 1, decodeSeqMs: 4 } } });
  try {
    const withBudget = (key: string, sloMs: number, maxTokens: number, extra: Record<string, string> = {}) =>
      request(`${s.url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${key}`, 'x-slo-ms': String(sloMs), ...extra }, body: JSON.stringify({ model: 'headroom-mock', prompt: 'the queue', max_tokens: maxTokens }) });
    const busy = withBudget('sk-alpha-000000001', 600_000, 600); // keeps the engine busy: no idle exploration
    await until(() => s.headroom.engine.numUnfinished > 0, 'the busy request running');
    const refused = await withBudget('sk-alpha-000000001', 1000, 8);
    const e = (await refused.body.json()) as { error: { code: string } };
    assert.equal(refused.statusCode, 503);
    assert.equal(e.error.code, 'slo_unattainable');
    const probe = await withBudget('sk-ops-00000000003', 1000, 8, { 'x-headroom-bypass-admission': '1' });
    await probe.body.json();
    assert.equal(probe.statusCode, 200, 'the operator probe skipped the decision');
    await (await busy).body.dump();
  } finally {
    await s.close();
  }
});

test('key entries: comments, roles, the environment variable; malformed entries name where they are without echoing the key', () => {
  const ring = KeyRing.parse(KEYS.map((text, i) => ({ text, where: `line ${i + 1}` })));
  assert.equal(ring.size, 3);
  assert.deepEqual(ring.tenants().sort(), ['default', 'ops', 'team-a', 'team-b']);
  const env = KeyRing.load({ env: 'sk-env-0000000001 t1;sk-env-0000000002 t2 operator\nsk-env-0000000003 t3' })!;
  assert.equal(env.size, 3);
  const ok = env.authenticate({ authorization: 'bearer sk-env-0000000002' });
  assert.deepEqual(ok, { ok: true, caller: { tenant: 't2', role: 'operator' } });
  assert.equal(KeyRing.load({ env: ' ; # nothing' }), null, 'no keys: open');
  const dir = mkdtempSync(join(tmpdir(), 'headroom-keys-'));
  try {
    writeFileSync(join(dir, 'empty.txt'), '# all keys revoked\n\n');
    assert.throws(() => KeyRing.load({ file: join(dir, 'empty.txt') }), /empty\.txt holds no key/, 'a key file without keys never opens the API');
    assert.throws(() => KeyRing.load({ file: join(dir, 'missing.txt') }), /--api-key-file: cannot read/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const bad = (text: string) => () => KeyRing.parse([{ text, where: 'keys.txt:3' }]);
  assert.throws(bad('sk-only-a-key'), /keys\.txt:3: expected 'key tenant \[role\]'/);
  assert.throws(bad('short t'), /keys\.txt:3: expected a key of 8-512 characters, got 5/);
  assert.throws(bad('sk-0000000001 t admin'), /expected role 'user' or 'operator', got 'admin'/);
  assert.throws(bad('sk-0000000001 bad{tenant}'), /expected a tenant of 1-64/);
  assert.throws(() => KeyRing.parse([{ text: 'sk-0000000001 a', where: 'x:1' }, { text: 'sk-0000000001 b', where: 'x:2' }]), /x:2: this key is listed twice/);
  try {
    bad('sk-secret-value t admin')();
  } catch (e) {
    assert.ok(!(e as Error).message.includes('sk-secret-value'));
  }
});
