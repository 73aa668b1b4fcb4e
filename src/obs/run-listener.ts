// What a server run tells the watchers that keep its history (the flight recorder, the live
// dashboard): each engine step, each admission decision, each refusal and each finish. Observability
// fans these out; a listener only records, never decides, and must stay cheap (it runs on the step
// loop's thread: no sync I/O, O(size of the event)).

import type { RefusalReason } from '../backend/refusal.ts';
import type { FinishReason, RequestTimeline } from '../engine/outputs.ts';
import type { Request } from '../engine/request.ts';
import type { StepRecord } from '../engine/step-record.ts';

/** An admission decision as the recorder keeps it (the bound against the request's budget). */
export interface DecisionEvent {
  readonly requestId: string;
  /** Engine clock, ms. */
  readonly atMs: number;
  readonly admit: boolean;
  /** The E2E bound the controller computed, ms (null: none computed). */
  readonly boundMs: number | null;
  /** The request's E2E budget, ms. */
  readonly budgetMs: number;
  /** Why, in a word (fits, explore, over_budget, off, ...). */
  readonly reason: string;
}

/** Function properties, not methods: the engine keeps `step` as a bare function. */
export interface RunListener {
  readonly step?: (record: StepRecord) => void;
  /** A request the engine took (engine mode), read at once and never kept. */
  readonly submitted?: (req: Request) => void;
  readonly decided?: (d: DecisionEvent) => void;
  /** `atMs`: engine clock when it was refused. */
  readonly refused?: (t: RequestTimeline, reason: RefusalReason, atMs: number) => void;
  /** Once per admitted request (per choice). */
  readonly finished?: (t: RequestTimeline, reason: FinishReason) => void;
}
