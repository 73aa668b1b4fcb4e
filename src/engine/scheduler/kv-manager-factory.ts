// Builds the KvManager for a configuration: paged (with or without the prefix cache) or contiguous.

import { ContiguousKvManager } from './contiguous-kv-manager.ts';
import type { KvManager, KvManagerOptions } from './kv-manager.ts';
import { PagedKvManager } from './paged-kv-manager.ts';

export function createKvManager(opts: KvManagerOptions): KvManager {
  if (opts.mode === 'paged') return new PagedKvManager(opts);
  if (opts.mode === 'contiguous') return new ContiguousKvManager(opts);
  throw new Error(`KvManager: expected mode 'paged' or 'contiguous', got '${String(opts.mode)}'`);
}
