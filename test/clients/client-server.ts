// The server the client-library tests talk to: the real HTTP server on the mock runner at real
// speed (a long generation is still running when a client aborts it), and the check that an
// aborted request left the engine as it found it.
import assert from 'node:assert/strict';
import type { TestServer } from '../helpers/headroom.ts';
import { startTestServer, waitForIdle } from '../helpers/headroom.ts';

export const MODEL = 'headroom-mock';

export function startClientServer(): Promise<TestServer> {
  return startTestServer({ mock: { cost: { speed: 1 } } });
}

/** What an abort must give back: every KV block and sequence id. */
export interface EngineBaseline {
  readonly numFreeBlocks: number;
  readonly numFreeSeqIds: number;
  readonly numSteps: number;
}

export function baseline(server: TestServer): EngineBaseline {
  const s = server.headroom.engine.stats();
  return { numFreeBlocks: s.scheduler.kv.numFreeBlocks, numFreeSeqIds: s.scheduler.numFreeSeqIds, numSteps: s.numSteps };
}

/** After a client aborted a request of `maxTokens`: the engine is idle, everything is free, and it stopped early. */
export async function assertAbortFreed(server: TestServer, before: EngineBaseline, maxTokens: number): Promise<void> {
  await waitForIdle(server.headroom);
  const after = baseline(server);
  assert.equal(after.numFreeBlocks, before.numFreeBlocks, 'every KV block returned');
  assert.equal(after.numFreeSeqIds, before.numFreeSeqIds, 'every sequence id returned');
  assert.ok(after.numSteps - before.numSteps < maxTokens, `the engine stopped generating (${after.numSteps - before.numSteps} steps)`);
}
