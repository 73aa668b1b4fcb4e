// Where the replicas' shared counts live: the `SharedStore` interface SharedFlowController talks to,
// and its Redis implementation (ioredis, one connection, the script in shared-script.ts).
//
// Failing fast is the point: a call that does not answer within `timeoutMs` rejects (ioredis's
// commandTimeout, which also covers a call waiting for a connection), and while Redis is down a
// call rejects at once instead of queueing (maxRetriesPerRequest 0): the controller then serves
// from its local share. ioredis keeps reconnecting in the background (every ≤ 500 ms); the
// controller's next call finds out that Redis is back.

import { randomUUID } from 'node:crypto';
import { createRequire } from 'node:module';
import { hostname } from 'node:os';
import type { Redis, RedisOptions } from 'ioredis';
import { redactUrlPassword } from '../util/redact-url.ts';
import type { FlowCounts, Reservation, SyncResult, SyncTiming } from './shared-script.ts';
import { SYNC_SCRIPT, parseSyncReply, syncArgs } from './shared-script.ts';

export interface SharedStore {
  /** This replica's id (the field and lease it owns in the shared state). */
  readonly replicaId: string;
  /** Set this replica's holding to `held`, renew its lease, grant a prefix of `batch`; rejects when the store cannot be reached in time. */
  sync(held: FlowCounts, batch: readonly Reservation[]): Promise<SyncResult>;
  close(): Promise<void>;
}

export interface RedisStoreOptions {
  /** redis://[user:password@]host:port[/db] or rediss:// */
  readonly url: string;
  /** A replica that has not called for this long is dropped, and its slots come back. */
  readonly leaseMs: number;
  /** A call slower than this fails (and the controller falls back to its local share). */
  readonly timeoutMs: number;
  /** Another replica's waiting note older than this is ignored (default 1000 ms; replicas with waiters refresh theirs every poll). */
  readonly waitStaleMs?: number;
  /** State created from nothing grants nothing for this long (default lease / 3 + timeout + 500 ms). */
  readonly graceMs?: number;
  /** Key prefix; replicas sharing caps share it. */
  readonly keyPrefix?: string;
  readonly replicaId?: string;
}

const DEFAULT_PREFIX = '{headroom:flow}';

/** A redis:// or rediss:// URL with a host, or an Error saying what is wrong with it (its password redacted). */
export function checkRedisUrl(raw: string): Error | null {
  const url = redactUrlPassword(raw);
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    return new Error(`expected a URL such as redis://host:6379, got '${url}'`);
  }
  if (u.protocol !== 'redis:' && u.protocol !== 'rediss:') return new Error(`expected a redis:// or rediss:// URL, got '${url}'`);
  if (u.hostname === '') return new Error(`expected a host in the URL, got '${url}'`);
  if (u.pathname !== '' && u.pathname !== '/' && !/^\/\d+$/.test(u.pathname)) return new Error(`expected a database number after the host (redis://host:port/0), got '${url}'`);
  return null;
}

type SyncCommand = (held: string, leases: string, waiting: string, born: string, ...args: (string | number)[]) => Promise<unknown>;

export class RedisStore implements SharedStore {
  readonly replicaId: string;
  readonly #redis: Redis;
  readonly #timing: SyncTiming;
  readonly #keys: readonly [string, string, string, string];

  constructor(opts: RedisStoreOptions) {
    const bad = checkRedisUrl(opts.url);
    if (bad !== null) throw bad;
    this.replicaId = opts.replicaId ?? `${hostname()}-${process.pid}-${randomUUID().slice(0, 8)}`;
    // Grace: a heartbeat (lease / 3) for every live replica to write its holding, plus a margin for
    // a reconnect (ioredis retries within 500 ms) and a slow call.
    this.#timing = { leaseMs: opts.leaseMs, waitStaleMs: opts.waitStaleMs ?? 1000, graceMs: opts.graceMs ?? Math.ceil(opts.leaseMs / 3) + opts.timeoutMs + 500 };
    const prefix = opts.keyPrefix ?? DEFAULT_PREFIX;
    this.#keys = [`${prefix}:held`, `${prefix}:leases`, `${prefix}:waiting`, `${prefix}:born`];
    // Loaded here, not at import: every CLI command imports the flow options, few use Redis.
    const { Redis: RedisClient } = createRequire(import.meta.url)('ioredis') as { Redis: new (url: string, options: RedisOptions) => Redis };
    this.#redis = new RedisClient(opts.url, {
      commandTimeout: opts.timeoutMs,
      connectTimeout: Math.max(opts.timeoutMs, 1000),
      maxRetriesPerRequest: 0,
      retryStrategy: (times) => Math.min(50 * times, 500),
      // A refused connection is the fallback's business, reported on /stats; not an unhandled 'error' event.
      lazyConnect: false,
    });
    this.#redis.on('error', () => undefined);
    this.#redis.defineCommand('headroomFlowSync', { numberOfKeys: 4, lua: SYNC_SCRIPT });
  }

  async sync(held: FlowCounts, batch: readonly Reservation[]): Promise<SyncResult> {
    const call = (this.#redis as unknown as { headroomFlowSync: SyncCommand }).headroomFlowSync;
    const reply = await call.call(this.#redis, ...this.#keys, ...syncArgs(this.replicaId, this.#timing, held, batch));
    return parseSyncReply(reply, batch.length);
  }

  /** Leaves the shared state at once (its slots come back now, not after the lease), then disconnects. */
  async close(): Promise<void> {
    try {
      if (this.#redis.status === 'ready') await this.#redis.multi().hdel(this.#keys[0], this.replicaId).zrem(this.#keys[1], this.replicaId).hdel(this.#keys[2], this.replicaId).exec();
    } catch {
      // Unreachable: the lease frees the slots instead.
    }
    this.#redis.disconnect();
  }
}
