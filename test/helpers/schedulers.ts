// Every scheduler the engine builds; tests loop over all of them (a fixed list: a scheduler that
// fails to build must fail the tests, not drop out of them).
import type { SchedulerName } from '../../src/engine/scheduler/factory.ts';

export const SCHEDULERS: readonly SchedulerName[] = ['fifo', 'static', 'continuous'];
