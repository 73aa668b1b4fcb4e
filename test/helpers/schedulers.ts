// Schedulers the engine can build today (tests loop over them).
import { createScheduler } from '../../src/engine/scheduler/factory.ts';
import { MockRunner } from '../../src/engine/runner/mock/mock-runner.ts';

export function availableSchedulers(): string[] {
  const info = new MockRunner().info;
  return ['fifo', 'static', 'continuous'].filter((name) => {
    try {
      createScheduler({ scheduler: name as 'fifo' }, info);
      return true;
    } catch {
      return false;
    }
  });
}
