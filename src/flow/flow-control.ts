// The flow-control seam: caps on requests and tokens in flight, priority bands, fairness between
// tenants. A request takes a ticket before it runs and gives it back when it ends, however it
// ends; or it waits in a bounded queue; or it is refused (429 with Retry-After). Same code in
// engine and gateway mode. The real one is flow-controller.ts; `noFlowControl` lets all through.
//
// Each request comes with its caller: the tenant its API key names (`default` without keys) and
// its role, so per-tenant fairness has what it needs. Tenants are a closed set (the configured
// keys'), so a tenant can key a map or a metric label without bounding it here.

import type { Refusal } from '../backend/refusal.ts';
import type { FlowState } from './flow-core.ts';
import { parseBand } from './priority.ts';

export type Role = 'user' | 'operator';

/** Who is asking (api/auth.ts fills it from the API key). */
export interface Caller {
  /** From the key's entry; `default` when no keys are configured. */
  readonly tenant: string;
  /** `operator` may skip admission (never flow control). */
  readonly role: Role;
}

/** What flow control sees of a request. */
export interface FlowRequest {
  readonly caller: Caller;
  /** Priority band, 0 (lowest) .. numBands − 1 (see `band`). */
  readonly band: number;
  /** Prompt tokens (0 when acquired before tokenizing, which happens only when `needsTokens` is false). */
  readonly inputTokens: number;
  /** Prompt tokens plus max_tokens × n. */
  readonly totalTokens: number;
}

export interface FlowTicket {
  /** Give the ticket back (idempotent). */
  release(): void;
}

export type FlowResult = { readonly ok: true; readonly ticket: FlowTicket } | { readonly ok: false; readonly refusal: Refusal };

/** Why flow control let a request go or not, as counted in `headroom_flow_decisions_total{reason}`. */
export const FLOW_DECISIONS = ['admitted', 'admitted_after_wait', 'queue_full', 'queue_ttl', 'too_large', 'client_left'] as const;
export type FlowDecision = (typeof FLOW_DECISIONS)[number];

/** Shared mode (several gateway replicas, shared-flow-controller.ts): where the caps are counted now. */
export interface SharedFlowState {
  /** `redis`: the caps hold across replicas; `local-fallback`: the store is unreachable, this replica serves from its share. */
  readonly mode: 'redis' | 'local-fallback';
  /** When the mode last changed (ISO 8601). */
  readonly since: string;
  /** The last error talking to the store (kept after it comes back), or null. */
  readonly lastError: string | null;
  /** Live replicas at the last sync (0 before any). */
  readonly replicasSeen: number;
  readonly replicaId: string;
  /** What this replica holds of the shared caps. */
  readonly held: { readonly requests: number; readonly inputTokens: number; readonly totalTokens: number };
  /** What all replicas held at the last sync (null before any). */
  readonly total: { readonly requests: number; readonly inputTokens: number; readonly totalTokens: number } | null;
  /** Requests granted locally, waiting for a shared reservation. */
  readonly waitingGlobal: number;
  /** Times this replica fell back from `redis` to its local share. */
  readonly fallbacks: number;
}

/** What /stats shows of flow control: the local state, plus the shared one in shared mode. */
export type FlowStats = FlowState & { readonly shared?: SharedFlowState };

export type FlowListener = (band: number, tenant: string, decision: FlowDecision) => void;

export interface FlowControl {
  readonly name: string;
  readonly numBands: number;
  /** A token cap is set: acquire after tokenizing, with the token counts. Otherwise acquire first. */
  readonly needsTokens: boolean;
  /** The band of a request's `x-headroom-priority` header (throws a RequestError, a 400, on a bad one). */
  band(header: string | string[] | undefined): number;
  /** A ticket now, a ticket after a wait, or a refusal (a request that can never fit throws a RequestError, a 400). An aborted signal leaves the queue at once. */
  acquire(req: FlowRequest, signal: AbortSignal): FlowResult | Promise<FlowResult>;
  /** In flight and waiting, for /stats and the gauges. */
  state(): FlowStats;
  /** Adds a listener called once per decision (metrics). */
  onDecision(listener: FlowListener): void;
  /** Timers and connections stopped (shared mode); the server calls it when it closes. */
  close?(): Promise<void>;
}

const NO_TICKET: FlowTicket = { release: () => undefined };

export const noFlowControl: FlowControl = {
  name: 'off',
  numBands: 1,
  needsTokens: false,
  // One band: a well-formed number is ignored (a gateway with bands forwards the header), a malformed one is still a 400.
  band: (header) => (header === undefined ? 0 : (parseBand(header), 0)),
  acquire: () => ({ ok: true, ticket: NO_TICKET }),
  state: () => ({ inFlight: { requests: 0, inputTokens: 0, totalTokens: 0 }, queued: [0], drainPerS: 0 }),
  onDecision: () => undefined,
};
