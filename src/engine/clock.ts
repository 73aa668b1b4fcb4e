// Time as a dependency: the engine and the API read one injected clock (ms, monotonic), so a test
// or a replay can drive time by hand and a record's times mean the same thing everywhere.

export interface Clock {
  /** Milliseconds on a monotonic clock (only differences are meaningful). */
  nowMs(): number;
}

export const monotonicClock: Clock = { nowMs: () => performance.now() };
