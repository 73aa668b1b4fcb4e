// Shared settings for the KV property tests: how deep to run, and which interesting states a
// run reached (a property test that never reaches them passes for the wrong reason).
//
// HEADROOM_PROPERTY_DEPTH=deep multiplies the number of runs by 10; HEADROOM_PROPERTY_SEED pins the seed.

import assert from 'node:assert/strict';

const deep = process.env.HEADROOM_PROPERTY_DEPTH === 'deep';

/** fast-check parameters for a property with `baseRuns` runs in CI. */
export function propertyParams(baseRuns: number): { numRuns: number; seed?: number } {
  const seed = process.env.HEADROOM_PROPERTY_SEED;
  const numRuns = deep ? baseRuns * 10 : baseRuns;
  return seed === undefined ? { numRuns } : { numRuns, seed: Number(seed) };
}

/** Counts, per interesting state, how many runs reached it at least once. */
export class Coverage {
  readonly #states: readonly string[];
  #runsReaching = new Map<string, number>();
  #current = new Set<string>();
  #numRuns = 0;
  #numOps = 0;

  constructor(states: readonly string[]) {
    this.#states = states;
    for (const s of states) this.#runsReaching.set(s, 0);
  }

  get numOps(): number {
    return this.#numOps;
  }

  startRun(): void {
    this.#current.clear();
  }

  op(): void {
    this.#numOps++;
  }

  hit(state: string): void {
    if (!this.#runsReaching.has(state)) throw new Error(`Coverage: unknown state ${state}`);
    this.#current.add(state);
  }

  endRun(): void {
    this.#numRuns++;
    for (const s of this.#current) this.#runsReaching.set(s, this.#runsReaching.get(s)! + 1);
  }

  /** Prints the share of runs reaching each state and fails if one was never reached. */
  reportAndAssert(label: string, minOps: number): void {
    const parts = this.#states.map((s) => `${s} ${((100 * this.#runsReaching.get(s)!) / Math.max(1, this.#numRuns)).toFixed(0)}%`);
    console.log(`# ${label}: ${this.#numRuns} runs, ${this.#numOps} operations; runs reaching: ${parts.join(', ')}`);
    for (const s of this.#states) assert.ok(this.#runsReaching.get(s)! > 0, `${label}: no run reached "${s}"`);
    assert.ok(this.#numOps >= minOps, `${label}: ran ${this.#numOps} operations, expected at least ${minOps}`);
  }
}

/** A small deterministic PRNG (mulberry32) for deriving token runs from one drawn integer. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
