// The one Lua script every gateway replica runs against the shared Redis (EVALSHA; ioredis falls
// back to EVAL after a restart empties Redis's script cache). It is the only writer of the shared
// state, and Redis runs a script alone, so check and count are one atomic step across replicas:
// two replicas bursting at once can never pass a cap, not even by one.
//
// State, four keys under one hash tag (one cluster slot):
//
//   <prefix>:held     hash    replica id → "requests inputTokens totalTokens" it holds now
//   <prefix>:leases   zset    replica id → lease expiry (ms, Redis's own clock: one clock for all)
//   <prefix>:waiting  hash    replica id → "band since seen": the band of its first request the
//                             caps turned away, since when (ms) it has had one waiting, and when it
//                             last said so
//   <prefix>:born     string  when this state was created (ms)
//
// One call (`sync`) does, in order:
//   1. drop every replica whose lease has expired (a crashed replica's slots come back one lease
//      after its last call);
//   2. sum what the other replicas hold;
//   3. grant the requests of the batch in order while each fits under its band's limits and no
//      other replica's fresh waiting note goes first (a higher band, or the same band waiting since
//      earlier), stopping at the first that may not go: no overtaking, across replicas too;
//   4. note this replica's waiting head — from now if it was just granted something, so replicas
//      with waiters take turns — or clear it;
//   5. write this replica's holding ABSOLUTELY (what the caller says it holds plus what was just
//      granted) and renew its lease.
//
// Why each rule:
//   - Absolute writes make a call idempotent: a call that timed out on the client but ran in Redis
//     leaves an over-count (safe) that the next call corrects, and a replica whose lease lapsed,
//     or that served from its local share while Redis was away, is counted in full by its next call.
//   - Without the waiting rule the replica releasing a slot takes it back for its own waiters in
//     the same call and a replica that only polls starves: 128k grants against 6k for two
//     saturated replicas (bench/flow/shared-latency.ts). A note older than the caller's
//     `waitStaleMs` is ignored (a waiting replica refreshes its note every poll), so a replica that
//     no longer reaches Redis does not hold the others back until its lease runs out.
//   - State created from nothing (the first start, or Redis restarted or flushed) grants nothing for
//     the caller's `graceMs`: replicas already holding slots are not in it yet, and each writes its
//     holding within a heartbeat; granting before that could pass a cap by what they hold.
//
// Invariant: after every call, Σ held over live replicas ≤ each cap, as long as every replica only
// holds what a call granted it (the local fallback breaks this on purpose; docs/flow-control.md).

/** Requests, prompt tokens and prompt + max_tokens × n. */
export interface FlowCounts {
  readonly requests: number;
  readonly inputTokens: number;
  readonly totalTokens: number;
}

/** One request asking for a reservation, with the limits of its band (Infinity: no limit). */
export interface Reservation {
  /** Its priority band (a higher band goes first across replicas). */
  readonly band: number;
  /** An earlier call turned it away (it has waited since this replica's waiting head was noted). */
  readonly blocked: boolean;
  readonly inputTokens: number;
  readonly totalTokens: number;
  readonly maxRequests: number;
  readonly maxInputTokens: number;
  readonly maxTotalTokens: number;
}

/** What one call decided. */
export interface SyncResult {
  /** How many requests of the batch were granted: always a prefix of it. */
  readonly numGranted: number;
  /** What all live replicas hold after the call. */
  readonly total: FlowCounts;
  /** Live replicas (this one included). */
  readonly numReplicas: number;
}

export const SYNC_SCRIPT = `
local held, leases, waiting, bornKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local me, leaseMs = ARGV[1], tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local born = tonumber(redis.call('GET', bornKey))
if born == nil then
  born = now
  redis.call('SET', bornKey, now)
end
for _, id in ipairs(redis.call('ZRANGEBYSCORE', leases, '-inf', now)) do
  redis.call('HDEL', held, id)
  redis.call('HDEL', waiting, id)
  redis.call('ZREM', leases, id)
end
local r, i, o = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local vals = redis.call('HGETALL', held)
for k = 1, #vals, 2 do
  if vals[k] ~= me then
    local a, b, c = string.match(vals[k + 1], '^(%d+) (%d+) (%d+)$')
    r, i, o = r + tonumber(a), i + tonumber(b), o + tonumber(c)
  end
end
local n, stale, grace, granted = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8]), 0
local settled = now >= born + grace
local mySince, others = nil, {}
local ws = redis.call('HGETALL', waiting)
for k = 1, #ws, 2 do
  local b, s, seen = string.match(ws[k + 1], '^(%d+) (%d+) (%d+)$')
  if b == nil then
    -- not a note this script wrote: ignored
  elseif ws[k] == me then mySince = tonumber(s)
  elseif tonumber(seen) >= now - stale then others[#others + 1] = {tonumber(b), tonumber(s)} end
end
local mr, mi, mo = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local headBand = nil
for k = 0, n - 1 do
  local base = 9 + k * 7
  local band, blocked = tonumber(ARGV[base]), tonumber(ARGV[base + 1])
  local ci, co = tonumber(ARGV[base + 2]), tonumber(ARGV[base + 3])
  local lr, li, lo = tonumber(ARGV[base + 4]), tonumber(ARGV[base + 5]), tonumber(ARGV[base + 6])
  local since = now
  if blocked == 1 and mySince ~= nil then since = mySince end
  local yield = false
  for _, h in ipairs(others) do
    if h[1] > band or (h[1] == band and h[2] < since) then yield = true end
  end
  if yield or not settled or (lr >= 0 and r + 1 > lr) or (li >= 0 and i + ci > li) or (lo >= 0 and o + co > lo) then
    headBand = band
    break
  end
  r, i, o = r + 1, i + ci, o + co
  mr, mi, mo = mr + 1, mi + ci, mo + co
  granted = granted + 1
end
if headBand == nil then
  redis.call('HDEL', waiting, me)
else
  -- A replica that was just granted something goes to the back: its new head waits from now.
  redis.call('HSET', waiting, me, string.format('%d %d %d', headBand, (granted == 0 and mySince) or now, now))
end
redis.call('HSET', held, me, string.format('%d %d %d', mr, mi, mo))
redis.call('ZADD', leases, now + leaseMs, me)
return {granted, r, i, o, redis.call('ZCARD', leases)}
`;

/** How the script treats time, from the caller's settings (ms). */
export interface SyncTiming {
  readonly leaseMs: number;
  /** Another replica's waiting note older than this is ignored. */
  readonly waitStaleMs: number;
  /** State created from nothing grants nothing for this long. */
  readonly graceMs: number;
}

/** Arguments of one call: replica id, lease, what it holds, batch size, stale and grace times, then seven numbers per request (limits −1: none). */
export function syncArgs(replicaId: string, timing: SyncTiming, held: FlowCounts, batch: readonly Reservation[]): (string | number)[] {
  const lim = (v: number): number => (v === Infinity ? -1 : v);
  const args: (string | number)[] = [replicaId, timing.leaseMs, held.requests, held.inputTokens, held.totalTokens, batch.length, timing.waitStaleMs, timing.graceMs];
  for (const b of batch) args.push(b.band, b.blocked ? 1 : 0, b.inputTokens, b.totalTokens, lim(b.maxRequests), lim(b.maxInputTokens), lim(b.maxTotalTokens));
  return args;
}

/** The script's reply as a SyncResult; anything else throws (another script under our name?), and the replica falls back. */
export function parseSyncReply(reply: unknown, batchLength: number): SyncResult {
  if (!Array.isArray(reply) || reply.length !== 5 || !reply.every((v) => typeof v === 'number')) throw new Error(`flow sync script: unexpected reply ${JSON.stringify(reply)}`);
  const [numGranted, requests, inputTokens, totalTokens, numReplicas] = reply as [number, number, number, number, number];
  if (numGranted < 0 || numGranted > batchLength) throw new Error(`flow sync script: granted ${numGranted} of a batch of ${batchLength}`);
  return { numGranted, total: { requests, inputTokens, totalTokens }, numReplicas };
}
