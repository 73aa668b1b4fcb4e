// How the gateway reaches upstreams that ask for credentials or speak TLS: an API key sent as
// `Authorization: Bearer` on everything the gateway sends to an upstream (forwarded requests,
// health probes, model lists, /props and /metrics scrapes) — one for all, or one per upstream from
// a key file (`URL KEY` lines) — and the TLS settings of every https connection (the CAs to trust
// besides the system's, a client certificate for mutual TLS, whether to verify).
//
// The client's own credentials are never passed on (forward-handler.ts strips them): the key the
// upstream sees is the gateway's. Files are read once, at start-up, and a file that is not PEM, or
// a certificate without its key, fails there with the file named, not at the first request.

import { readFileSync } from 'node:fs';
import { createSecureContext, rootCertificates } from 'node:tls';
import type { buildConnector } from 'undici';
import { normalizeUpstreamUrl } from './upstream.ts';

export interface UpstreamAccess {
  /** Sent as `Authorization: Bearer <apiKey>` to every upstream without its own key; null: no header. */
  readonly apiKey: string | null;
  /** Per-upstream keys by normalized base URL (absent: none), used instead of apiKey for that upstream. */
  readonly apiKeys?: ReadonlyMap<string, string>;
  /** PEM CA certificates trusted for https upstreams, in addition to the system's; null: the system's only. */
  readonly ca: string | null;
  /** PEM client certificate and key for mutual TLS; both or neither. */
  readonly cert: string | null;
  readonly key: string | null;
  /** Verify https upstreams' certificates (off: any certificate is accepted). */
  readonly verify: boolean;
}

export const NO_UPSTREAM_ACCESS: UpstreamAccess = { apiKey: null, ca: null, cert: null, key: null, verify: true };

export interface UpstreamAccessFiles {
  readonly apiKey?: string | undefined;
  /** `URL KEY` per line (blank lines and `#` comments skipped); every URL one of `upstreams`. */
  readonly apiKeysFile?: string | undefined;
  /** The configured upstream URLs (normalized), which the key file's URLs must name. */
  readonly upstreams?: readonly string[];
  readonly caFile?: string | undefined;
  readonly certFile?: string | undefined;
  readonly keyFile?: string | undefined;
  readonly verify?: boolean | undefined;
}

/** Reads and checks the files; throws an Error naming the flag and the file on anything unusable. */
export function loadUpstreamAccess(f: UpstreamAccessFiles): UpstreamAccess {
  const apiKey = f.apiKey === undefined || f.apiKey === '' ? null : f.apiKey;
  if (apiKey !== null && /[\r\n]/.test(apiKey)) throw new Error('--upstream-api-key: expected one line, got a key with a line break');
  if ((f.certFile === undefined) !== (f.keyFile === undefined)) {
    throw new Error('--upstream-cert and --upstream-key: expected both (a client certificate and its private key) or neither');
  }
  const read = (flag: string, file: string | undefined, marker: RegExp): string | null => {
    if (file === undefined) return null;
    const text = readText(flag, file);
    if (!marker.test(text)) throw new Error(`${flag}: expected a PEM file, got '${file}' without a matching -----BEGIN ...----- block`);
    return text;
  };
  const access: UpstreamAccess = {
    apiKey,
    ...(f.apiKeysFile === undefined ? {} : { apiKeys: readApiKeys(f.apiKeysFile, f.upstreams ?? []) }),
    ca: read('--upstream-ca', f.caFile, /-----BEGIN CERTIFICATE-----/),
    cert: read('--upstream-cert', f.certFile, /-----BEGIN CERTIFICATE-----/),
    key: read('--upstream-key', f.keyFile, /-----BEGIN [A-Z ]*PRIVATE KEY-----/),
    verify: f.verify ?? true,
  };
  try {
    // Parses every certificate and checks that the key belongs to the certificate.
    createSecureContext(secureOptions(access));
  } catch (err) {
    throw new Error(`upstream TLS files: ${(err as Error).message}`, { cause: err });
  }
  return access;
}

function readText(flag: string, file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (err) {
    throw new Error(`${flag}: cannot read '${file}': ${(err as Error).message}`, { cause: err });
  }
}

/** The key file: one `URL KEY` per line, each URL a configured upstream, none twice; errors name the file and line. */
function readApiKeys(file: string, upstreams: readonly string[]): Map<string, string> {
  const flag = '--upstream-api-keys-file';
  const keys = new Map<string, string>();
  readText(flag, file).split('\n').forEach((raw, i) => {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) return;
    const at = `${flag}: ${file} line ${i + 1}`;
    const fields = line.split(/\s+/);
    if (fields.length !== 2) throw new Error(`${at}: expected 'URL KEY', got ${fields.length} field(s)`);
    let url: string;
    try {
      url = normalizeUpstreamUrl(fields[0]!);
    } catch (err) {
      throw new Error(`${at}: ${(err as Error).message}`, { cause: err });
    }
    if (!upstreams.includes(url)) throw new Error(`${at}: ${url} is not one of the upstreams (${upstreams.join(', ')})`);
    if (keys.has(url)) throw new Error(`${at}: a second key for ${url}`);
    keys.set(url, fields[1]!);
  });
  return keys;
}

/** Headers every request to the upstream at `url` (normalized) carries: its own key, else the shared one. */
export function accessHeaders(a: UpstreamAccess, url: string): Record<string, string> {
  const key = a.apiKeys?.get(url) ?? a.apiKey;
  return key === null ? {} : { authorization: `Bearer ${key}` };
}

/** undici `Agent` connect options for https upstreams (plain http ignores them). */
export function connectOptions(a: UpstreamAccess, timeoutMs: number): buildConnector.BuildOptions {
  return { timeout: timeoutMs, ...secureOptions(a) };
}

function secureOptions(a: UpstreamAccess): { ca?: string[]; cert?: string; key?: string; rejectUnauthorized: boolean } {
  return {
    // `ca` replaces the system's roots: keep them and add the given ones.
    ...(a.ca === null ? {} : { ca: [...rootCertificates, a.ca] }),
    ...(a.cert === null ? {} : { cert: a.cert }),
    ...(a.key === null ? {} : { key: a.key }),
    rejectUnauthorized: a.verify,
  };
}
