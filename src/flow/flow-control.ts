// The flow-control seam: caps on requests and tokens in flight, priority bands, fairness between
// tenants. A request takes a ticket before it runs and gives it back when it ends, however it
// ends; or it is refused at once. Same code in engine and gateway mode.
//
// Each request comes with its caller: the tenant its API key names (`default` without keys) and
// its role, so per-tenant caps and fairness have what they need. Tenants are a closed set (the
// configured keys'), so a tenant can key a map or a metric label without bounding it here.
//
// Today the only implementation lets everything through.

import type { Refusal } from '../backend/refusal.ts';
import type { AdmissionContext } from '../admission/controller.ts';

export type Role = 'user' | 'operator';

/** Who is asking (api/auth.ts fills it from the API key). */
export interface Caller {
  /** From the key's entry; `default` when no keys are configured. */
  readonly tenant: string;
  /** `operator` may skip admission (never flow control). */
  readonly role: Role;
}

export interface FlowTicket {
  /** Give the ticket back (idempotent). */
  release(): void;
}

export type FlowResult = { readonly ok: true; readonly ticket: FlowTicket } | { readonly ok: false; readonly refusal: Refusal };

export interface FlowControl {
  readonly name: string;
  acquire(ctx: AdmissionContext, caller: Caller): FlowResult;
}

const NO_TICKET: FlowTicket = { release: () => undefined };

export const noFlowControl: FlowControl = {
  name: 'off',
  acquire: () => ({ ok: true, ticket: NO_TICKET }),
};
