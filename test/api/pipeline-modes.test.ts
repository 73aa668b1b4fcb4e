// The front door's shared steps (src/api/request-call.ts), the same cases run against both modes:
// engine mode (the mock runner) and gateway mode (a gateway in front of an engine-mode Headroom).
// Each case checks what the client gets and what the server's books say: the operator bypass and
// its 403/400, a flow-control refusal, an admission refusal (traced with the features it saw),
// an admitted request's outcome reaching the controller and the trace exactly once, a bad
// priority header.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { request } from 'undici';
import type { AdmissionController, AdmissionDecision, AdmissionOutcome } from '../../src/admission/controller.ts';
import { KeyRing } from '../../src/api/auth.ts';
import { refusal } from '../../src/backend/refusal.ts';
import type { FlowControl } from '../../src/flow/flow-control.ts';
import { noFlowControl } from '../../src/flow/flow-control.ts';
import { startTestGateway } from '../helpers/gateway.ts';
import { startTestServer } from '../helpers/headroom.ts';
import { startOpsServer } from './ops-server.ts';

const KEY_LINES = ['sk-user-0000000001 team-a', 'sk-ops-00000000003 ops operator'];
const KEYS = KeyRing.parse(KEY_LINES.map((text, i) => ({ text, where: `entry ${i + 1}` })));
const USER = { authorization: 'Bearer sk-user-0000000001' };
const OPERATOR = { authorization: 'Bearer sk-ops-00000000003' };

interface Setup {
  readonly admission: AdmissionController;
  readonly flow?: FlowControl;
  readonly traceOut?: string;
}

interface Front {
  readonly url: string;
  close(): Promise<void>;
}

/** The two front doors, started the same way. */
const MODES: Record<string, (s: Setup) => Promise<Front>> = {
  engine: (s) => startOpsServer({ admission: s.admission, keys: KEY_LINES, server: { logLevel: 'silent' }, ...(s.flow === undefined ? {} : { flow: s.flow }), ...(s.traceOut === undefined ? {} : { traceOut: s.traceOut }) }),
  gateway: async (s) => {
    const upstream = await startTestServer();
    const gw = await startTestGateway([upstream.url], { admission: s.admission, keys: KEYS, ...(s.flow === undefined ? {} : { flow: s.flow }), ...(s.traceOut === undefined ? {} : { traceOut: s.traceOut }) });
    return { url: gw.url, close: async () => (await gw.close(), await upstream.close()) };
  },
};

/** Admits (or refuses) everything, counting what it was asked and what it learned. */
class Recording implements AdmissionController {
  readonly name = 'recording';
  readonly outcomes: AdmissionOutcome[] = [];
  numDecided = 0;
  constructor(
    readonly admit: boolean,
    readonly needsFeatures = true,
  ) {}
  decide(): AdmissionDecision {
    this.numDecided++;
    const memo = { e2ePredictionMs: 10, ttftPredictionMs: null, sloMs: 1000, ttftBudgetMs: null };
    if (this.admit) return { admit: true, boundMs: 10, reason: 'fits', memo };
    return { admit: false, boundMs: 99_999, reason: 'over_budget', memo, refusal: refusal('conformal', { message: 'too busy', retryAfterS: 7 }) };
  }
  observe(_x: Float64Array, _d: AdmissionDecision, o: AdmissionOutcome): void {
    this.outcomes.push(o);
  }
  state(): Record<string, unknown> {
    return { name: this.name };
  }
}

const post = (url: string, headers: Record<string, string> = {}, body: unknown = { model: 'headroom-mock', prompt: 'the queue', max_tokens: 3 }) =>
  request(`${url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });

async function errorOf(r: Awaited<ReturnType<typeof post>>): Promise<{ status: number; code: string; param: string | null; retryAfter: string | undefined }> {
  const e = (await r.body.json()) as { error: { code: string; param: string | null } };
  const ra = r.headers['retry-after'];
  return { status: r.statusCode, code: e.error.code, param: e.error.param, retryAfter: typeof ra === 'string' ? ra : undefined };
}

async function metric(url: string, re: RegExp): Promise<number> {
  const text = await (await request(`${url}/metrics`)).body.text();
  const m = re.exec(text);
  return m === null ? 0 : Number(m[1]);
}

function traceRows(file: string): { admitted: boolean; outcome: string; features: Record<string, number> }[] {
  return readFileSync(file, 'utf8').trim().split('\n').filter((l) => l.length > 0).map((l) => JSON.parse(l) as { admitted: boolean; outcome: string; features: Record<string, number> });
}

for (const [mode, start] of Object.entries(MODES)) {
  test(`${mode} mode: an operator's bypass skips a refusing controller; a user asking gets 403, a malformed header 400`, async () => {
    const admission = new Recording(false, false);
    const s = await start({ admission });
    try {
      assert.deepEqual(await errorOf(await post(s.url, OPERATOR)), { status: 503, code: 'slo_unattainable', param: null, retryAfter: '7' });
      assert.equal(admission.numDecided, 1);
      const served = await post(s.url, { ...OPERATOR, 'x-headroom-bypass-admission': '1' });
      assert.equal(served.statusCode, 200);
      await served.body.dump();
      assert.equal(admission.numDecided, 1, 'the controller was not asked');
      assert.equal(admission.outcomes.length, 0, 'nor did it learn from the bypassing request');
      assert.deepEqual(await errorOf(await post(s.url, { ...USER, 'x-headroom-bypass-admission': '1' })), { status: 403, code: 'permission_denied', param: 'x-headroom-bypass-admission', retryAfter: undefined });
      assert.equal((await errorOf(await post(s.url, { ...OPERATOR, 'x-headroom-bypass-admission': 'yes please' }))).status, 400);
      assert.equal(admission.numDecided, 1);
      assert.equal(await metric(s.url, /^headroom_admission_bypassed_total\{tenant="ops"\} (\d+)$/m), 1);
      assert.equal(await metric(s.url, /^headroom_refusals_total\{reason="conformal"\} (\d+)$/m), 1);
    } finally {
      await s.close();
    }
  });

  test(`${mode} mode: a flow-control refusal is the API's 429 with its Retry-After, counted, never decided on`, async () => {
    const admission = new Recording(true);
    const flow: FlowControl = { ...noFlowControl, name: 'refusing', acquire: () => ({ ok: false, refusal: refusal('flow_cap', { retryAfterS: 3 }) }) };
    const s = await start({ admission, flow });
    try {
      assert.deepEqual(await errorOf(await post(s.url, USER)), { status: 429, code: 'rate_limited', param: null, retryAfter: '3' });
      assert.equal(admission.numDecided, 0);
      assert.equal(await metric(s.url, /^headroom_refusals_total\{reason="flow_cap"\} (\d+)$/m), 1);
    } finally {
      await s.close();
    }
  });

  test(`${mode} mode: an admitted request's outcome reaches the controller and the trace once; a refused one is traced with its features`, async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), `hr-pipeline-${mode}-`));
    const traceOut = path.join(dir, 'trace.jsonl');
    const admission = new Recording(true);
    const s = await start({ admission, traceOut });
    try {
      // Streamed, so both modes measure a TTFT (a gateway sees a whole answer's first token only when it all arrives).
      for (let i = 0; i < 2; i++) {
        const r = await post(s.url, USER, { model: 'headroom-mock', prompt: 'the queue', max_tokens: 3, stream: true });
        assert.equal(r.statusCode, 200);
        assert.match(await r.body.text(), /data: \[DONE\]/);
      }
      assert.equal(admission.numDecided, 2);
      assert.equal(admission.outcomes.length, 2, 'each admitted request reports back once');
      for (const o of admission.outcomes) {
        assert.equal(o.censored, false);
        assert.ok(o.ttftMs !== null && o.e2eMs !== null && o.ttftMs >= 0 && o.ttftMs <= o.e2eMs, JSON.stringify(o));
      }
      Object.assign(admission, { admit: false });
      assert.equal((await errorOf(await post(s.url, USER))).code, 'slo_unattainable');
      assert.equal((await errorOf(await post(s.url, USER))).code, 'slo_unattainable');
      await s.close();
      const rows = traceRows(traceOut);
      assert.deepEqual(rows.map((r) => [r.admitted, r.outcome]), [[true, 'length'], [true, 'length'], [false, 'refused'], [false, 'refused']]);
      assert.ok(rows.every((r) => typeof r.features['prompt_tokens'] === 'number' && r.features['prompt_tokens'] > 0), 'every row holds the features the decision saw');
    } finally {
      await s.close().catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test(`${mode} mode: a malformed priority header is a 400 naming it, before flow control or admission`, async () => {
    const admission = new Recording(true);
    const s = await start({ admission });
    try {
      assert.deepEqual(await errorOf(await post(s.url, { ...USER, 'x-headroom-priority': 'urgent' })), { status: 400, code: 'invalid_value', param: 'x-headroom-priority', retryAfter: undefined });
      assert.equal(admission.numDecided, 0);
    } finally {
      await s.close();
    }
  });
}
