// How the gateway reaches upstreams that ask for credentials or speak TLS: one API key sent as
// `Authorization: Bearer` on everything the gateway sends (forwarded requests, health probes,
// model lists, /props and /metrics scrapes), and the TLS settings of every https connection (the
// CAs to trust besides the system's, a client certificate for mutual TLS, whether to verify).
//
// The client's own credentials are never passed on (forward-handler.ts strips them): the key the
// upstream sees is the gateway's. Files are read once, at start-up, and a file that is not PEM, or
// a certificate without its key, fails there with the file named, not at the first request.

import { readFileSync } from 'node:fs';
import { createSecureContext, rootCertificates } from 'node:tls';
import type { buildConnector } from 'undici';

export interface UpstreamAccess {
  /** Sent as `Authorization: Bearer <apiKey>` to every upstream; null: no header. */
  readonly apiKey: string | null;
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
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (err) {
      throw new Error(`${flag}: cannot read '${file}': ${(err as Error).message}`, { cause: err });
    }
    if (!marker.test(text)) throw new Error(`${flag}: expected a PEM file, got '${file}' without a matching -----BEGIN ...----- block`);
    return text;
  };
  const access: UpstreamAccess = {
    apiKey,
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

/** Headers every request to an upstream carries. */
export function accessHeaders(a: UpstreamAccess): Record<string, string> {
  return a.apiKey === null ? {} : { authorization: `Bearer ${a.apiKey}` };
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
