// Builds the scheduler named by configuration.

import type { RunnerInfo } from '../runner/runner.ts';
import { FifoScheduler } from './fifo.ts';
import type { Scheduler } from './scheduler.ts';

export type SchedulerName = 'fifo' | 'static' | 'continuous';

export interface SchedulerConfig {
  readonly scheduler: SchedulerName;
}

export function createScheduler(config: SchedulerConfig, runner: RunnerInfo): Scheduler {
  switch (config.scheduler) {
    case 'fifo':
      return new FifoScheduler({ maxBatchTokens: runner.maxBatchTokens, maxSequences: runner.maxSequences });
    default:
      throw new Error(`scheduler '${config.scheduler}' is not available yet`);
  }
}
