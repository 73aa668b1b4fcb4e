// The flow-control seam: caps on requests and tokens in flight, priority bands, fairness between
// tenants. A request takes a ticket before it runs and gives it back when it ends, however it
// ends; or it is refused at once. Same code in engine and gateway mode.
//
// Today the only implementation lets everything through.

import type { Refusal } from '../backend/refusal.ts';
import type { AdmissionContext } from '../admission/controller.ts';

export interface FlowTicket {
  /** Give the ticket back (idempotent). */
  release(): void;
}

export type FlowResult = { readonly ok: true; readonly ticket: FlowTicket } | { readonly ok: false; readonly refusal: Refusal };

export interface FlowControl {
  readonly name: string;
  acquire(ctx: AdmissionContext): FlowResult;
}

const NO_TICKET: FlowTicket = { release: () => undefined };

export const noFlowControl: FlowControl = {
  name: 'off',
  acquire: () => ({ ok: true, ticket: NO_TICKET }),
};
