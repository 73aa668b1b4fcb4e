// API keys: who may call the API, and as which tenant. Optional: without keys every request is
// served as tenant `default` with role `user`.
//
// Sources, one key per entry, `key tenant [role]` (role `user` or `operator`, default `user`):
//   --api-key-file   one entry per line; `#` starts a comment; blank lines are skipped
//   HEADROOM_API_KEYS  the same entries separated by `;` or newlines
// A client presents its key as `Authorization: Bearer <key>` or `x-api-key: <key>`.
//
// Invariants:
// - A presented key is compared with every configured key, each in constant time
//   (timingSafeEqual over SHA-256 digests): how long a check takes says nothing about which
//   key, or how much of one, matched.
// - Keys never leave this module: not in config (/stats), logs or errors; a tenant name does.
// - Tenants are a closed set (those the keys name, plus `default`), so a tenant is a bounded
//   metric label; tenant names are short and plain ([A-Za-z0-9._-]{1,64}).

import { createHash, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { IncomingHttpHeaders } from 'node:http';
import type { Caller } from '../flow/flow-control.ts';
import { ApiError } from './errors.ts';

/** The caller when no keys are configured (the `user` body field does not pick a tenant: clients choose it). */
export const ANONYMOUS: Caller = { tenant: 'default', role: 'user' };

export type AuthResult = { readonly ok: true; readonly caller: Caller } | { readonly ok: false; readonly error: ApiError };

interface KeyEntry {
  readonly digest: Buffer;
  readonly caller: Caller;
}

const MIN_KEY_CHARS = 8;
const MAX_KEY_CHARS = 512;
const TENANT = /^[A-Za-z0-9._-]{1,64}$/;

export class KeyRing {
  readonly #entries: readonly KeyEntry[];

  private constructor(entries: readonly KeyEntry[]) {
    this.#entries = entries;
  }

  /**
   * Entries from the key file and the environment variable (either may be absent); null when
   * neither is given or the variable alone holds no key. A key file without a key is an error: an
   * operator who meant to close the API must not get an open one.
   */
  static load(opts: { file?: string; env?: string }): KeyRing | null {
    const lines: { text: string; where: string }[] = [];
    if (opts.file !== undefined) {
      let text: string;
      try {
        text = readFileSync(opts.file, 'utf8');
      } catch (e) {
        throw new Error(`--api-key-file: cannot read ${opts.file}: ${(e as Error).message}`, { cause: e });
      }
      text.split(/\r?\n/).forEach((t, i) => lines.push({ text: t, where: `${opts.file}:${i + 1}` }));
      if (KeyRing.parse(lines).size === 0) throw new Error(`--api-key-file: ${opts.file} holds no key ('key tenant [role]' per line)`);
    }
    if (opts.env !== undefined) opts.env.split(/[;\n]/).forEach((t, i) => lines.push({ text: t, where: `HEADROOM_API_KEYS entry ${i + 1}` }));
    const ring = KeyRing.parse(lines);
    return ring.size === 0 ? null : ring;
  }

  /** Parse entries; a malformed one throws naming where it is (never echoing the key). */
  static parse(lines: readonly { text: string; where: string }[]): KeyRing {
    const entries: KeyEntry[] = [];
    const seen = new Set<string>();
    for (const { text, where } of lines) {
      const body = text.replace(/#.*$/, '').trim();
      if (body.length === 0) continue;
      const [key, tenant, role = 'user', ...rest] = body.split(/\s+/);
      if (tenant === undefined || rest.length > 0) throw new Error(`API keys, ${where}: expected 'key tenant [role]'`);
      if (key!.length < MIN_KEY_CHARS || key!.length > MAX_KEY_CHARS) throw new Error(`API keys, ${where}: expected a key of ${MIN_KEY_CHARS}-${MAX_KEY_CHARS} characters, got ${key!.length}`);
      if (!TENANT.test(tenant)) throw new Error(`API keys, ${where}: expected a tenant of 1-64 letters, digits, '.', '_' or '-', got '${tenant.slice(0, 80)}'`);
      if (role !== 'user' && role !== 'operator') throw new Error(`API keys, ${where}: expected role 'user' or 'operator', got '${role.slice(0, 80)}'`);
      const digest = sha256(key!);
      const hex = digest.toString('hex');
      if (seen.has(hex)) throw new Error(`API keys, ${where}: this key is listed twice`);
      seen.add(hex);
      entries.push({ digest, caller: { tenant, role } });
    }
    return new KeyRing(entries);
  }

  get size(): number {
    return this.#entries.length;
  }

  /** Every tenant a caller can be (`default` included): the metric label's closed set. */
  tenants(): string[] {
    return [...new Set([ANONYMOUS.tenant, ...this.#entries.map((e) => e.caller.tenant)])];
  }

  /** The caller a request's headers name, or the 401 it gets. */
  authenticate(headers: IncomingHttpHeaders): AuthResult {
    const presented = presentedKey(headers);
    if (presented === null) {
      return { ok: false, error: new ApiError('invalid_api_key', "You didn't provide an API key. Send it as 'Authorization: Bearer <key>' (or 'x-api-key: <key>').") };
    }
    const digest = sha256(presented);
    let match: Caller | null = null;
    for (const e of this.#entries) {
      // No early exit: every key is compared, whichever matches.
      if (timingSafeEqual(e.digest, digest)) match = e.caller;
    }
    if (match === null) return { ok: false, error: new ApiError('invalid_api_key', 'Incorrect API key provided.') };
    return { ok: true, caller: match };
  }
}

/** The key in `Authorization: Bearer <key>`, else in `x-api-key`; null when neither carries one. */
function presentedKey(headers: IncomingHttpHeaders): string | null {
  const auth = headers.authorization;
  if (typeof auth === 'string') {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(auth);
    if (m !== null) return m[1]!;
  }
  const x = headers['x-api-key'];
  if (typeof x === 'string' && x.trim().length > 0) return x.trim();
  return null;
}

function sha256(s: string): Buffer {
  return createHash('sha256').update(s, 'utf8').digest();
}
