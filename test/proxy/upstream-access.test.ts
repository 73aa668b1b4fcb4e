// Upstreams behind TLS and an API key: the gateway trusts a private CA it is given (and only then),
// presents a client certificate to an upstream that demands one, sends its own key — never the
// client's — on every request including probes, and an upstream that refuses the key or the
// certificate is ejected with the reason, so clients get 503 no_upstream, not a hang.
//
// Certificates are made per run with Debian's openssl (a CA, a server certificate for 127.0.0.1,
// a client certificate), in a temporary folder.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { request } from 'undici';
import { loadUpstreamAccess } from '../../src/proxy/upstream-access.ts';
import type { UpstreamAccess } from '../../src/proxy/upstream-access.ts';
import { runCli } from '../cli/run-cli.ts';
import { startTestGateway } from '../helpers/gateway.ts';
import { StubUpstream } from '../helpers/stub-upstream.ts';

let dir = '';
const pem: Record<'ca' | 'serverKey' | 'serverCert' | 'clientKey' | 'clientCert' | 'otherKey', string> = { ca: '', serverKey: '', serverCert: '', clientKey: '', clientCert: '', otherKey: '' };
const file = (name: string): string => join(dir, name);

before(() => {
  dir = mkdtempSync(join(tmpdir(), 'headroom-tls-'));
  const ssl = (...args: string[]): void => void execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  ssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '2', '-subj', '/CN=headroom test CA');
  writeFileSync(file('server.ext'), 'subjectAltName=IP:127.0.0.1\n');
  ssl('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'server.key', '-out', 'server.csr', '-subj', '/CN=127.0.0.1');
  ssl('x509', '-req', '-in', 'server.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'server.pem', '-days', '2', '-extfile', 'server.ext');
  ssl('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'client.key', '-out', 'client.csr', '-subj', '/CN=headroom gateway');
  ssl('x509', '-req', '-in', 'client.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'client.pem', '-days', '2');
  ssl('genpkey', '-algorithm', 'RSA', '-pkeyopt', 'rsa_keygen_bits:2048', '-out', 'other.key');
  pem.ca = readFileSync(file('ca.pem'), 'utf8');
  pem.serverKey = readFileSync(file('server.key'), 'utf8');
  pem.serverCert = readFileSync(file('server.pem'), 'utf8');
  pem.clientKey = readFileSync(file('client.key'), 'utf8');
  pem.clientCert = readFileSync(file('client.pem'), 'utf8');
  pem.otherKey = readFileSync(file('other.key'), 'utf8');
});

after(() => rmSync(dir, { recursive: true, force: true }));

const access = (a: Partial<UpstreamAccess>): UpstreamAccess => ({ apiKey: null, ca: null, cert: null, key: null, verify: true, ...a });

async function chat(url: string, stream: boolean, headers: Record<string, string> = {}): Promise<{ status: number; body: string }> {
  const res = await request(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ model: 'stub-model', messages: [{ role: 'user', content: 'hi' }], max_tokens: 3, stream }),
  });
  return { status: res.statusCode, body: await res.body.text() };
}

test('https upstream with a private CA and an API key: probes and requests carry the key, the client\'s credentials stay behind', async () => {
  const stub = await new StubUpstream({ tls: { key: pem.serverKey, cert: pem.serverCert }, bearer: 'upstream-secret' }).start();
  assert.match(stub.url, /^https:/);
  const gw = await startTestGateway([stub.url], { access: access({ ca: pem.ca, apiKey: 'upstream-secret' }) });
  try {
    const snap = gw.gateway.backend.pool.snapshot()[0]!;
    assert.equal(snap.health, 'healthy', String(snap.failure));
    assert.deepEqual(snap.models, ['stub-model']);
    assert.ok(snap.loadAgeMs !== null, 'the /metrics scrape got through');
    const plain = await chat(gw.url, false, { authorization: 'Bearer client-key' });
    assert.equal(plain.status, 200, plain.body);
    assert.equal((JSON.parse(plain.body) as { usage: { completion_tokens: number } }).usage.completion_tokens, 3);
    const streamed = await chat(gw.url, true);
    assert.equal(streamed.status, 200);
    assert.match(streamed.body, /data: \[DONE\]/);
    assert.equal(stub.requests.length, 2);
    for (const r of stub.requests) assert.equal(r.headers.authorization, 'Bearer upstream-secret');
    assert.equal(stub.numUnauthorized, 0);
  } finally {
    await gw.close();
    await stub.stop();
  }
});

test('an https upstream whose CA is not trusted is ejected with the certificate error; --upstream-tls-verify off reaches it', async () => {
  const stub = await new StubUpstream({ tls: { key: pem.serverKey, cert: pem.serverCert } }).start();
  const untrusted = await startTestGateway([stub.url]);
  try {
    const snap = untrusted.gateway.backend.pool.snapshot()[0]!;
    assert.equal(snap.health, 'ejected');
    assert.match(String(snap.failure), /certificate|CERT/i);
    const r = await chat(untrusted.url, false);
    assert.equal(r.status, 503, r.body);
    assert.equal(stub.requests.length, 0);
  } finally {
    await untrusted.close();
  }
  const unchecked = await startTestGateway([stub.url], { access: access({ verify: false }) });
  try {
    const r = await chat(unchecked.url, false);
    assert.equal(r.status, 200, r.body);
  } finally {
    await unchecked.close();
    await stub.stop();
  }
});

test('a wrong API key: the upstream refuses the model list, it is ejected, clients get 503 no_upstream', async () => {
  const stub = await new StubUpstream({ bearer: 'right' }).start();
  for (const apiKey of [null, 'wrong']) {
    const gw = await startTestGateway([stub.url], { access: access({ apiKey }) });
    try {
      const snap = gw.gateway.backend.pool.snapshot()[0]!;
      assert.equal(snap.health, 'ejected', `key ${apiKey}`);
      assert.match(String(snap.failure), /\/v1\/models answered 401/);
      const r = await chat(gw.url, false);
      assert.equal(r.status, 503, r.body);
    } finally {
      await gw.close();
    }
  }
  assert.ok(stub.numUnauthorized >= 2);
  assert.equal(stub.requests.length, 0);
  await stub.stop();
});

test('mutual TLS: an upstream that demands a client certificate is reached only with one', async () => {
  const stub = await new StubUpstream({ tls: { key: pem.serverKey, cert: pem.serverCert, ca: pem.ca } }).start();
  const without = await startTestGateway([stub.url], { access: access({ ca: pem.ca }) });
  try {
    assert.equal(without.gateway.backend.pool.snapshot()[0]!.health, 'ejected');
  } finally {
    await without.close();
  }
  const withCert = await startTestGateway([stub.url], { access: access({ ca: pem.ca, cert: pem.clientCert, key: pem.clientKey }) });
  try {
    const r = await chat(withCert.url, true);
    assert.equal(r.status, 200, r.body);
    assert.equal(stub.requests.length, 1);
  } finally {
    await withCert.close();
    await stub.stop();
  }
});

test('per-upstream keys: each upstream gets its own key on probes and requests, the others the shared one', async () => {
  const stubs = await Promise.all(['key-a', 'key-b', 'shared'].map((bearer) => new StubUpstream({ bearer }).start()));
  const [a, b, c] = stubs as [StubUpstream, StubUpstream, StubUpstream];
  const apiKeys = new Map([[a.url, 'key-a'], [b.url, 'key-b']]);
  const gw = await startTestGateway(stubs.map((x) => x.url), { access: access({ apiKey: 'shared', apiKeys }) });
  try {
    for (const snap of gw.gateway.backend.pool.snapshot()) assert.equal(snap.health, 'healthy', `${snap.url}: ${String(snap.failure)}`);
    for (let i = 0; i < 9; i++) assert.equal((await chat(gw.url, i % 2 === 0)).status, 200);
    assert.equal(a.requests.length + b.requests.length + c.requests.length, 9);
    for (const [stub, key] of [[a, 'key-a'], [b, 'key-b'], [c, 'shared']] as const) {
      for (const r of stub.requests) assert.equal(r.headers.authorization, `Bearer ${key}`);
      assert.equal(stub.numUnauthorized, 0, `${key}: a probe or request came with another key`);
    }
  } finally {
    await gw.close();
    await Promise.all(stubs.map((x) => x.stop()));
  }
});

test('the per-upstream key file: URL KEY lines; a URL not among the upstreams, a second key, a malformed line fail with the line named', () => {
  const ups = ['http://10.0.0.5:8000', 'https://api.example.com'];
  writeFileSync(file('keys.txt'), '# per upstream\nhttp://10.0.0.5:8000/v1  key-one\n\nhttps://api.example.com/ key-two\n');
  const a = loadUpstreamAccess({ apiKey: 'shared', apiKeysFile: file('keys.txt'), upstreams: ups });
  assert.deepEqual([...a.apiKeys!], [['http://10.0.0.5:8000', 'key-one'], ['https://api.example.com', 'key-two']]);
  const bad = (text: string, msg: RegExp): void => {
    writeFileSync(file('bad-keys.txt'), text);
    assert.throws(() => loadUpstreamAccess({ apiKeysFile: file('bad-keys.txt'), upstreams: ups }), msg);
  };
  bad('http://10.0.0.9:8000 k\n', /bad-keys\.txt line 1: http:\/\/10\.0\.0\.9:8000 is not one of the upstreams/);
  bad('http://10.0.0.5:8000 k\nhttp://10.0.0.5:8000/v1 k2\n', /line 2: a second key for http:\/\/10\.0\.0\.5:8000/);
  bad('\nhttp://10.0.0.5:8000\n', /line 2: expected 'URL KEY', got 1 field/);
  bad('ftp://10.0.0.5 k\n', /line 1: expected an http:\/\/ or https:\/\/ upstream URL/);
  assert.throws(() => loadUpstreamAccess({ apiKeysFile: file('missing.txt'), upstreams: ups }), /--upstream-api-keys-file: cannot read/);
});

test('loadUpstreamAccess: reads the files, and refuses what cannot work with the flag named', () => {
  const a = loadUpstreamAccess({ apiKey: 'k', caFile: file('ca.pem'), certFile: file('client.pem'), keyFile: file('client.key') });
  assert.equal(a.apiKey, 'k');
  assert.equal(a.ca, pem.ca);
  assert.equal(a.verify, true);
  assert.deepEqual(loadUpstreamAccess({}), access({}));
  assert.throws(() => loadUpstreamAccess({ certFile: file('client.pem') }), /--upstream-cert and --upstream-key: expected both/);
  assert.throws(() => loadUpstreamAccess({ caFile: file('server.ext') }), /--upstream-ca: expected a PEM file/);
  assert.throws(() => loadUpstreamAccess({ caFile: file('missing.pem') }), /--upstream-ca: cannot read/);
  assert.throws(() => loadUpstreamAccess({ certFile: file('client.pem'), keyFile: file('other.key') }), /upstream TLS files: .*(mismatch|key)/i);
  assert.throws(() => loadUpstreamAccess({ apiKey: 'a\nb' }), /one line/);
});

test('headroom gateway: a key file naming another upstream is one line on stderr and exit 1', async () => {
  writeFileSync(file('other-keys.txt'), 'http://127.0.0.1:2 k\n');
  const r = await runCli(['gateway', '--upstream', 'http://127.0.0.1:1', '--upstream-api-keys-file', file('other-keys.txt'), '--port', '0']);
  assert.equal(r.code, 1);
  assert.match(r.stderr, /^headroom: error: --upstream-api-keys-file: .*other-keys\.txt line 1: http:\/\/127\.0\.0\.1:2 is not one of the upstreams \(http:\/\/127\.0\.0\.1:1\)\n$/);
});

test('headroom gateway: a client certificate without its key is one line on stderr and exit 1', async () => {
  const r = await runCli(['gateway', '--upstream', 'https://127.0.0.1:1', '--upstream-cert', file('client.pem'), '--port', '0']);
  assert.equal(r.code, 1);
  assert.match(r.stderr, /^headroom: error: --upstream-cert and --upstream-key: expected both/);
});
