// The training worker's entry: a worker thread has its own module loader, so it registers tsx (as
// bin/headroom.mjs does for the main thread) before loading the TypeScript worker — unless the
// worker is compiled JavaScript here (the image), which runs as it is.
import { existsSync } from 'node:fs';

const compiled = new URL('./train-worker.js', import.meta.url);
if (existsSync(compiled)) await import(compiled.href);
else {
  const { register } = await import('tsx/esm/api');
  register();
  await import('./train-worker.ts');
}
