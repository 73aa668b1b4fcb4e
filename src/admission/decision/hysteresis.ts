// Hysteresis on the fit test: a Schmitt trigger between admitting and shedding.
//
// Why: shedding is a positive feedback loop — shed, load falls, the bound drops, admit, load rises,
// the bound climbs — and with one threshold a bound that hovers at the budget flips the controller on
// every request. Two thresholds break it: while admitting, a request fits when bound ≤ budget; once a
// request is shed, the next fits only when bound ≤ resumeFactor × budget (0.9 by default, the
// reference's value). Noise smaller than the gap cannot make it chatter.
//
//   admitting ──bound > budget──▶ shedding ──bound ≤ 0.9·budget──▶ admitting
//
// The state is global to one controller, not per request: it describes the engine's regime, and a
// request's own budget only scales the thresholds. Complexity O(1).

import { bug } from '../../util/bug.ts';

export type HysteresisState = 'admitting' | 'shedding';

export interface HysteresisOptions {
  /** Share of the budget the bound must fit inside to resume admitting, in (0, 1]; 0.9 by default (1 turns hysteresis off). */
  readonly resumeFactor?: number;
}

export class Hysteresis {
  readonly resumeFactor: number;
  #state: HysteresisState = 'admitting';
  #numTransitions = 0;

  constructor(options: HysteresisOptions = {}) {
    const { resumeFactor = 0.9 } = options;
    if (!(resumeFactor > 0 && resumeFactor <= 1)) throw new RangeError(`Hysteresis: expected resumeFactor in (0, 1], got ${String(resumeFactor)}`);
    this.resumeFactor = resumeFactor;
  }

  get state(): HysteresisState {
    return this.#state;
  }

  /** State changes so far (for /stats, and the chatter test). */
  get numTransitions(): number {
    return this.#numTransitions;
  }

  /** Whether a bound fits its budget in the current regime; moves the regime. A NaN is a bug (it compares false both ways). */
  fits(boundMs: number, budgetMs: number): boolean {
    if (Number.isNaN(boundMs) || !(budgetMs > 0)) bug(`hysteresis given bound ${boundMs} ms, budget ${budgetMs} ms`);
    const threshold = this.#state === 'admitting' ? budgetMs : this.resumeFactor * budgetMs;
    const fits = boundMs <= threshold;
    const next: HysteresisState = fits ? 'admitting' : 'shedding';
    if (next !== this.#state) {
      this.#state = next;
      this.#numTransitions++;
    }
    return fits;
  }

  /** Whether the bound would fit without hysteresis: tells "over budget" from "held off by the trigger". */
  static fitsBudget(boundMs: number, budgetMs: number): boolean {
    return boundMs <= budgetMs;
  }
}
