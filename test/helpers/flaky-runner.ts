// A mock runner whose next non-empty step fails on demand: 'throw' (an addon bug) or 'fail' (a
// backend error the runner reports as a value). For tests of how failures reach clients.
import { MockRunner } from '../../src/engine/runner/mock/mock-runner.ts';
import type { RunnerPlan, StepResult } from '../../src/engine/plan.ts';

export class FlakyRunner extends MockRunner {
  failNext: 'throw' | 'fail' | null = null;
  override async execute(plan: RunnerPlan): Promise<StepResult> {
    const mode = plan.items.length > 0 ? this.failNext : null;
    if (mode !== null) this.failNext = null;
    if (mode === 'throw') throw new Error('simulated addon bug');
    if (mode === 'fail') return { ok: false, reason: 'backend_error', message: 'simulated backend failure' };
    return super.execute(plan);
  }
}
