// The training worker's entry: a worker thread has its own module loader, so it registers tsx
// (as bin/headroom.mjs does for the main thread) before loading the TypeScript worker.
import { register } from 'tsx/esm/api';

register();
await import('./train-worker.ts');
